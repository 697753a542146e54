/**
 * Output encoding: line masks as 1-bit greyscale PNGs (our own tiny encoder over node:zlib),
 * and the overlay JPEG (lines blended into the photo, then sharp).
 */
import { constants as zlibConstants, deflateSync } from "node:zlib";
import sharp from "sharp";
import type { RawImage } from "./decode.js";
import { dilateMask, type BoxMask } from "./mask.js";

const CRC_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** crc32 is the CRC-32 of PNG chunks (ISO 3309), optionally continuing from `crc`. */
export function crc32(bytes: Uint8Array, crc = 0): number {
  let c = ~crc >>> 0;
  for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/** pngChunk frames one PNG chunk: length, type, data, CRC. */
export function pngChunk(type: string, data: Uint8Array): Buffer {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, "ascii");
  out.set(data, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}

/** PNG_SIGNATURE is the 8-byte start of every PNG file. */
export const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/** MaskPngOptions configure {@link encodeMaskPng}. */
export interface MaskPngOptions {
  /**
   * zlib level 0-9. Default 6. With the run-length strategy used here the level hardly
   * matters: a 12 MP mask deflates in about 1 ms to a few kB (the default strategy takes
   * 6 ms at level 6, 14 ms at level 9, for a slightly smaller file).
   */
  level?: number;
}

/**
 * encodeMaskPng writes a mask as a single-channel 1-bit greyscale PNG, width x height. PNG
 * decoders expand 1-bit grey to 8 bits as 0 and 255 (the PNG spec's sample scaling), so the
 * file reads as the SPEC's "255 on the line, 0 elsewhere" at ~1/8 of the 8-bit encoding work.
 */
export function encodeMaskPng(mask: BoxMask, options: MaskPngOptions = {}): Uint8Array {
  const { width, height } = mask;
  const stride = (width + 7) >> 3;
  const rowLen = stride + 1; // filter byte (0 = None) + packed bits
  const raw = Buffer.alloc(rowLen * height);
  const bw = mask.x1 - mask.x0;
  const d = mask.data;
  for (let y = Math.max(0, mask.y0); y < Math.min(height, mask.y1); y++) {
    const src = (y - mask.y0) * bw - mask.x0; // src + X is image column X
    const dst = y * rowLen + 1;
    for (let X = mask.x0; X < mask.x1; X++) {
      if (d[src + X]) raw[dst + (X >> 3)] |= 0x80 >> (X & 7);
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 1; // bit depth
  ihdr[9] = 0; // colour type: greyscale
  ihdr[10] = 0; // deflate
  ihdr[11] = 0; // adaptive filtering (we use None on every row)
  ihdr[12] = 0; // no interlace
  const idat = deflateSync(raw, { level: options.level ?? 6, strategy: zlibConstants.Z_RLE });
  return Buffer.concat([PNG_SIGNATURE, pngChunk("IHDR", ihdr), pngChunk("IDAT", idat), pngChunk("IEND", new Uint8Array(0))]);
}

/** RGB is a colour as 0..255 components. */
export type RGB = readonly [number, number, number];

/** LINE_COLOURS are the overlay colours of SPEC.md: heart red, head blue, life green. */
export const LINE_COLOURS = Object.freeze({
  heart: [255, 0, 0] as RGB,
  head: [0, 0, 255] as RGB,
  life: [0, 255, 0] as RGB,
});

/** OverlayOptions configure {@link encodeOverlayJpeg}. */
export interface OverlayOptions {
  /** Opacity of the line colour, 0..1. Default 0.6. */
  alpha?: number;
  /** Stroke half-width added around each mask, pixels. Default {@link overlayStrokeRadius}. */
  radius?: number;
  /** JPEG quality 1-100. Default 85. */
  quality?: number;
  /** Longest side of the JPEG in pixels: drawn at full size, then scaled down (never up). 0 or absent: full size. */
  maxSide?: number;
}

/**
 * overlayStrokeRadius scales the overlay stroke to the image: 1 pixel per 600 pixels of the
 * longer side, at least 1 (a 4032x3024 photo gets 7).
 */
export function overlayStrokeRadius(width: number, height: number): number {
  return Math.max(1, Math.round(Math.max(width, height) / 600));
}

/**
 * blendMask paints `colour` at opacity `alpha` into the RGB image wherever the mask is set,
 * in place.
 */
export function blendMask(image: RawImage, mask: BoxMask, colour: RGB, alpha: number): void {
  const bw = mask.x1 - mask.x0;
  const ch = image.channels;
  const d = image.data;
  const a = Math.min(1, Math.max(0, alpha));
  const [r, g, b] = [colour[0] * a, colour[1] * a, colour[2] * a];
  const k = 1 - a;
  for (let y = mask.y0; y < mask.y1; y++) {
    const src = (y - mask.y0) * bw;
    let p = (y * image.width + mask.x0) * ch;
    for (let x = 0; x < bw; x++, p += ch) {
      if (mask.data[src + x]) {
        d[p] = d[p] * k + r + 0.5;
        d[p + 1] = d[p + 1] * k + g + 0.5;
        d[p + 2] = d[p + 2] * k + b + 0.5;
      }
    }
  }
}

/**
 * encodeOverlayJpeg draws each mask, dilated by the stroke radius, semi-transparently over
 * the photo and encodes it as a JPEG of the same size (or scaled down to `maxSide`). The image's pixels are modified in
 * place (the caller no longer needs them). Huffman optimisation is off: at 12 MP it costs
 * 4x the encode time for 5% of the size.
 */
export async function encodeOverlayJpeg(
  image: RawImage,
  lines: ReadonlyArray<{ mask: BoxMask; colour: RGB }>,
  options: OverlayOptions = {},
): Promise<Uint8Array> {
  const radius = options.radius ?? overlayStrokeRadius(image.width, image.height);
  for (const { mask, colour } of lines) {
    if (mask.x1 <= mask.x0 || mask.y1 <= mask.y0) continue;
    blendMask(image, dilateMask(mask, radius), colour, options.alpha ?? 0.6);
  }
  const maxSide = options.maxSide ?? 0;
  const scaled = maxSide > 0 && Math.max(image.width, image.height) > maxSide;
  const drawn = sharp(image.data, { raw: { width: image.width, height: image.height, channels: image.channels as 3 } });
  return (scaled ? drawn.resize({ width: maxSide, height: maxSide, fit: "inside" }) : drawn)
    .jpeg({ quality: options.quality ?? 85, optimiseCoding: false, chromaSubsampling: "4:2:0" })
    .toBuffer();
}
