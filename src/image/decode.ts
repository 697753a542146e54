/**
 * Image decoding: format sniffing by magic bytes, cheap header checks, then a full decode with
 * sharp under explicit limits, EXIF orientation applied, to 8-bit sRGB raw pixels.
 */
import sharp from "sharp";
import type { Metadata, OutputInfo } from "sharp";
import { MAX_IMAGE_BYTES } from "../limits.js";
import { ImageError } from "../engine-errors.js";
import { checkJpegCost } from "./jpeg-structure.js";

/** ImageFormat is one of the two accepted input formats. */
export type ImageFormat = "jpeg" | "png";

/**
 * IMAGE_LIMITS are SPEC.md section 2 input limits: file size in bytes, side length in pixels
 * (after EXIF orientation) and total pixel count.
 */
export const IMAGE_LIMITS = Object.freeze({
  /** Largest accepted image file: 5 MiB. */
  maxBytes: MAX_IMAGE_BYTES,
  /** Smallest accepted side, pixels. */
  minSide: 64,
  /** Largest accepted side, pixels. */
  maxSide: 10_000,
  /** Largest accepted width x height. */
  maxPixels: 40_000_000,
});

/** RawImage is an interleaved 8-bit image, row-major, `channels` bytes per pixel. */
export interface RawImage {
  /** Pixel bytes, width * height * channels long. */
  data: Uint8Array;
  /** Width in pixels. */
  width: number;
  /** Height in pixels. */
  height: number;
  /** Bytes per pixel: 3 for RGB. */
  channels: number;
}

/** ImageHeader is what {@link readImageHeader} learns without decoding pixels. */
export interface ImageHeader {
  format: ImageFormat;
  /** Width after EXIF orientation, pixels. */
  width: number;
  /** Height after EXIF orientation, pixels. */
  height: number;
  /** EXIF orientation tag, 1 when absent. */
  orientation: number;
}

/** DecodedImage is an upright 8-bit RGB image plus its header. */
export interface DecodedImage extends RawImage {
  format: ImageFormat;
  channels: 3;
}

const JPEG_MAGIC = [0xff, 0xd8, 0xff];
const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

function startsWith(bytes: Uint8Array, magic: readonly number[]): boolean {
  if (bytes.length < magic.length) return false;
  for (let i = 0; i < magic.length; i++) if (bytes[i] !== magic[i]) return false;
  return true;
}

/**
 * sniffImageFormat recognises JPEG (`FF D8 FF`) and PNG (the 8-byte signature) by their leading
 * bytes, never by a declared type. Returns undefined for anything else.
 */
export function sniffImageFormat(bytes: Uint8Array): ImageFormat | undefined {
  if (startsWith(bytes, JPEG_MAGIC)) return "jpeg";
  if (startsWith(bytes, PNG_MAGIC)) return "png";
  return undefined;
}

function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * checkImageFile is the cheap synchronous part of the input checks: throws {@link ImageError}
 * `image_too_large` over {@link IMAGE_LIMITS}.maxBytes, `unsupported_image_format` unless the
 * leading bytes are JPEG or PNG, and `invalid_image` for a JPEG whose decoding would cost more than
 * its pixel count says ({@link checkJpegCost}: a walk over its markers); returns the format.
 */
export function checkImageFile(bytes: Uint8Array): ImageFormat {
  if (bytes.byteLength > IMAGE_LIMITS.maxBytes) {
    throw new ImageError(
      "image_too_large",
      `The image is ${bytes.byteLength} bytes; at most ${IMAGE_LIMITS.maxBytes} bytes (5 MiB) are accepted.`,
    );
  }
  const format = sniffImageFormat(bytes);
  if (format === undefined) {
    throw new ImageError("unsupported_image_format", "The image must be a JPEG or PNG file.");
  }
  if (format === "jpeg") checkJpegCost(bytes);
  return format;
}

/**
 * readImageHeader checks size and format and reads the header dimensions without decoding the
 * pixels, so that a decompression bomb (a tiny file declaring 60,000 x 60,000 pixels) costs
 * nothing. Throws {@link ImageError}: `image_too_large` over {@link IMAGE_LIMITS}.maxBytes,
 * `unsupported_image_format` unless JPEG or PNG, `invalid_image` for an unreadable header,
 * `image_dimensions_out_of_range` when a side (after EXIF orientation) is outside 64..10,000 px
 * or the image exceeds 40 megapixels. `format`: where {@link checkImageFile} already ran (its
 * marker walk is not repeated).
 */
export async function readImageHeader(bytes: Uint8Array, format = checkImageFile(bytes)): Promise<ImageHeader> {
  let meta: Metadata;
  try {
    meta = await sharp(asBuffer(bytes), { limitInputPixels: false, failOn: "error" }).metadata();
  } catch (cause) {
    throw new ImageError("invalid_image", `The ${format.toUpperCase()} image could not be read.`, { cause });
  }
  if (meta.format !== format || !(meta.width > 0) || !(meta.height > 0)) {
    throw new ImageError("invalid_image", `The ${format.toUpperCase()} image could not be read.`);
  }
  const orientation = meta.orientation ?? 1;
  const swap = orientation >= 5 && orientation <= 8;
  const width = swap ? meta.height : meta.width;
  const height = swap ? meta.width : meta.height;
  checkDimensions(width, height);
  return { format, width, height, orientation };
}

/**
 * checkDimensions throws `image_dimensions_out_of_range` unless each side is within
 * 64..10,000 px and width x height is at most 40 megapixels.
 */
export function checkDimensions(width: number, height: number): void {
  const { minSide, maxSide, maxPixels } = IMAGE_LIMITS;
  if (width < minSide || height < minSide || width > maxSide || height > maxSide || width * height > maxPixels) {
    throw new ImageError(
      "image_dimensions_out_of_range",
      `The image is ${width}x${height} pixels; each side must be ${minSide} to ${maxSide} pixels and the image at most 40 megapixels.`,
    );
  }
}

/** DecodeOptions tune {@link decodeImage}. */
export interface DecodeOptions {
  /** The header {@link readImageHeader} read from these bytes (not read again). */
  header?: ImageHeader;
  /**
   * Decode a copy reduced by this factor (each side divided by it, rounded; 1: full size, the
   * default). For a JPEG, {@link JPEG_SHRINKS} are the factors that libjpeg's DCT scaling makes
   * cheap; a PNG is decoded at full size and resized.
   */
  shrink?: number;
}

/**
 * JPEG_SHRINKS are the least reduction factors at which sharp decodes a JPEG at 1/8, 1/4 and 1/2
 * of its size (libjpeg's DCT shrink-on-load) and resizes the rest (lanczos3): sharp picks the
 * load shrink m for a resize by f when f >= m, but halves it when floor(f) == m (its guard for
 * libjpeg's rounding, src/pipeline.cc), so a resize by exactly 2, 4 or 8 decodes at 1/1, 1/2, 1/4.
 * decode.spec "decodes a JPEG of EXIF orientation %i reduced by 3, 5 and 9" pins the copy (size,
 * orientation, pixels); docs/decisions/reduced-decode.md what it saves.
 */
export const JPEG_SHRINKS: readonly number[] = Object.freeze([9, 5, 3]);

/**
 * decodeImage turns JPEG or PNG bytes into upright 8-bit sRGB pixels: header checks first
 * ({@link readImageHeader}), then a sharp decode with `limitInputPixels` = 40 MP and
 * `failOn: "error"` (truncated or corrupt data is refused), EXIF orientation applied, alpha
 * flattened onto white, CMYK / greyscale / 16-bit converted to 8-bit RGB; with
 * `options.shrink` > 1, a copy reduced by that factor (round(width / shrink) x
 * round(height / shrink), oriented), decoded with shrink-on-load where the JPEG allows it.
 * Throws {@link ImageError} for every input fault.
 */
export async function decodeImage(bytes: Uint8Array, options: DecodeOptions = {}): Promise<DecodedImage> {
  const header = options.header ?? (await readImageHeader(bytes));
  const shrink = options.shrink ?? 1;
  const width = shrink > 1 ? Math.max(1, Math.round(header.width / shrink)) : header.width;
  const height = shrink > 1 ? Math.max(1, Math.round(header.height / shrink)) : header.height;
  let out: { data: Buffer; info: OutputInfo };
  try {
    let pipeline = sharp(asBuffer(bytes), {
      limitInputPixels: IMAGE_LIMITS.maxPixels,
      failOn: "error",
      autoOrient: true,
    })
      .flatten({ background: { r: 255, g: 255, b: 255 } })
      .toColourspace("srgb");
    // The target is the oriented size (sharp swaps it for a turned photo before shrink-on-load).
    if (shrink > 1) pipeline = pipeline.resize(width, height, { fit: "fill", kernel: "lanczos3", fastShrinkOnLoad: true });
    out = await pipeline.raw({ depth: "uchar" }).toBuffer({ resolveWithObject: true });
  } catch (cause) {
    throw new ImageError("invalid_image", `The ${header.format.toUpperCase()} image could not be decoded.`, { cause });
  }
  const { info } = out;
  if (info.channels !== 3 || info.width !== width || info.height !== height) {
    throw new ImageError("invalid_image", `The ${header.format.toUpperCase()} image could not be decoded.`);
  }
  return { format: header.format, width: info.width, height: info.height, channels: 3, data: out.data };
}
