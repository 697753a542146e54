/**
 * Preprocessing: sharp shrinks the decoded image for the hand search (resizeToFit), the rotated
 * palm frame is rendered at the model input size (renderFrame), then the pixels become a planar,
 * normalised float32 tensor.
 */
import sharp from "sharp";
import { frameToImage, type PalmFrame } from "../landmarks/palm-frame.js";
import type { RawImage } from "./decode.js";

/** TensorSpec is what preprocessing needs to know of the model input. */
export interface TensorSpec {
  /** Square model input side S, pixels. */
  inputSize: number;
  channelOrder: "RGB" | "BGR";
  normalization: { scale: number; mean: readonly number[]; std: readonly number[] };
  /** Padding value for pixels outside the image, 0..255 (0 = black). */
  padValue: number;
}

/**
 * toTensor converts an S x S interleaved RGB byte image into a planar normalised float32
 * tensor: `(p / scale - mean[c]) / std[c]`, channels in the model's order.
 */
export function toTensor(rgb: Uint8Array, spec: TensorSpec): Float32Array {
  const n = spec.inputSize * spec.inputSize;
  const out = new Float32Array(3 * n);
  const { scale, mean, std } = spec.normalization;
  for (let c = 0; c < 3; c++) {
    const src = spec.channelOrder === "RGB" ? c : 2 - c;
    const a = 1 / (scale * std[c]);
    const b = -mean[c] / std[c];
    const base = c * n;
    for (let i = 0, j = src; i < n; i++, j += 3) out[base + i] = rgb[j] * a + b;
  }
  return out;
}

/**
 * FRAME_OVERSAMPLE: a rotated view is first shrunk by sharp (area-aware lanczos3) to this many
 * source pixels per model pixel, then sampled bilinearly at the rotated positions, so that thin
 * creases survive the shrink without the cost of rotating the full-resolution photo.
 */
const FRAME_OVERSAMPLE = 1.5;

/** PhotoSize is the size of the photo a frame's coordinates are in, pixels. */
export interface PhotoSize {
  width: number;
  height: number;
}

/**
 * renderFrame renders `frame` (a rotated, possibly mirrored square of the photo) at size x size
 * pixels; points outside the photo read as the pad value. `photo`: the size of the photo whose
 * pixels the frame is in, when `image` is a scaled copy of it (a reduced decode); default the
 * image's own size. Returns interleaved RGB bytes.
 */
export async function renderFrame(
  image: RawImage,
  frame: PalmFrame,
  size: number,
  padValue: number,
  photo: PhotoSize = image,
): Promise<Uint8Array> {
  const out = new Uint8Array(size * size * 3).fill(padValue);
  // Photo pixels -> image pixels (continuous coordinates: both scale about the origin corner).
  const scaleX = image.width / photo.width;
  const scaleY = image.height / photo.height;
  const at = (u: number, v: number): [number, number] => {
    const [X, Y] = frameToImage(frame, size, u, v);
    return [X * scaleX, Y * scaleY];
  };
  const corners = [at(-0.5, -0.5), at(size - 0.5, -0.5), at(-0.5, size - 0.5), at(size - 0.5, size - 0.5)];
  const x0 = Math.max(0, Math.floor(Math.min(...corners.map((c) => c[0]))) - 1);
  const y0 = Math.max(0, Math.floor(Math.min(...corners.map((c) => c[1]))) - 1);
  const x1 = Math.min(image.width, Math.ceil(Math.max(...corners.map((c) => c[0]))) + 1);
  const y1 = Math.min(image.height, Math.ceil(Math.max(...corners.map((c) => c[1]))) + 1);
  if (x1 - x0 < 1 || y1 - y0 < 1) return out;
  const k = (frame.side * Math.min(scaleX, scaleY)) / size; // image pixels per model pixel
  let src: Uint8Array = image.data;
  let sw = image.width;
  let sh = image.height;
  let ox = 0;
  let oy = 0;
  let fx = 1;
  let fy = 1;
  if (k > FRAME_OVERSAMPLE) {
    const bw = x1 - x0;
    const bh = y1 - y0;
    sw = Math.max(1, Math.round((bw * FRAME_OVERSAMPLE) / k));
    sh = Math.max(1, Math.round((bh * FRAME_OVERSAMPLE) / k));
    src = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: image.channels as 3 } })
      .extract({ left: x0, top: y0, width: bw, height: bh })
      .resize(sw, sh, { fit: "fill", kernel: "lanczos3" })
      .raw()
      .toBuffer();
    ox = x0;
    oy = y0;
    fx = bw / sw;
    fy = bh / sh;
  }
  const ch = image.channels;
  const W = image.width;
  const H = image.height;
  for (let v = 0; v < size; v++) {
    for (let u = 0; u < size; u++) {
      const [X, Y] = at(u, v);
      if (X < 0 || Y < 0 || X >= W || Y >= H) continue;
      // Continuous source coordinates -> pixel-centre coordinates of the (shrunk) source.
      const sx = Math.min(sw - 1, Math.max(0, (X - ox) / fx - 0.5));
      const sy = Math.min(sh - 1, Math.max(0, (Y - oy) / fy - 0.5));
      const ix = Math.min(sw - 2, Math.floor(sx));
      const iy = Math.min(sh - 2, Math.floor(sy));
      const ax = sw > 1 ? sx - ix : 0;
      const ay = sh > 1 ? sy - iy : 0;
      const i00 = (Math.max(0, iy) * sw + Math.max(0, ix)) * ch;
      const i01 = i00 + (sw > 1 ? ch : 0);
      const i10 = i00 + (sh > 1 ? sw * ch : 0);
      const i11 = i10 + (sw > 1 ? ch : 0);
      const o = (v * size + u) * 3;
      for (let c = 0; c < 3; c++) {
        const top = src[i00 + c] + (src[i01 + c] - src[i00 + c]) * ax;
        const bottom = src[i10 + c] + (src[i11 + c] - src[i10 + c]) * ax;
        out[o + c] = Math.round(top + (bottom - top) * ay);
      }
    }
  }
  return out;
}

/**
 * preprocessFrame renders the palm frame at model resolution and returns the tensor. `photo`: as
 * for {@link renderFrame}, when `image` is a scaled copy of the photo the frame is in.
 */
export async function preprocessFrame(
  image: RawImage,
  frame: PalmFrame,
  spec: TensorSpec,
  photo: PhotoSize = image,
): Promise<Float32Array> {
  return toTensor(await renderFrame(image, frame, spec.inputSize, spec.padValue, photo), spec);
}

/**
 * resizeToFit returns a copy of the image shrunk (never enlarged) so that its longer side is at
 * most `maxSide`, as interleaved RGB; the image itself when it already fits.
 */
export async function resizeToFit(image: RawImage, maxSide: number): Promise<RawImage> {
  const scale = maxSide / Math.max(image.width, image.height);
  if (scale >= 1) return image;
  const width = Math.max(1, Math.round(image.width * scale));
  const height = Math.max(1, Math.round(image.height * scale));
  const data = await sharp(image.data, { raw: { width: image.width, height: image.height, channels: image.channels as 3 } })
    .resize(width, height, { fit: "fill" })
    .raw()
    .toBuffer();
  return { data, width, height, channels: image.channels };
}
