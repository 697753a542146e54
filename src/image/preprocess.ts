/**
 * Preprocessing: sharp resizes the decoded image (whole, letterboxed; or a square palm crop)
 * to the model input, then the pixels become a planar, normalised float32 tensor.
 */
import sharp from "sharp";
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
 * SquareBox is a square region of the image in pixels; it may extend beyond the image, where
 * it reads as padding. Model pixel (u, v) covers image point
 * (x + (u + 0.5) * side / S - 0.5, y + (v + 0.5) * side / S - 0.5).
 */
export interface SquareBox {
  x: number;
  y: number;
  side: number;
}

/** Preprocessed is a model input tensor plus where it sits in the image. */
export interface Preprocessed {
  /** Planar [3,S,S] float32, normalised. */
  tensor: Float32Array;
  /** The square region of the image the tensor shows (the letterbox of a whole image is one too). */
  box: SquareBox;
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
 * cropResize renders the square `box` of `image` at S x S pixels: the part inside the image is
 * extracted and resized with sharp (area-averaging shrink, so thin creases are kept), the part
 * outside is filled with the pad value. Returns interleaved RGB bytes.
 */
export async function cropResize(image: RawImage, box: SquareBox, size: number, padValue: number): Promise<Uint8Array> {
  const scale = size / box.side;
  const ix0 = Math.max(0, box.x);
  const iy0 = Math.max(0, box.y);
  const ix1 = Math.min(image.width, box.x + box.side);
  const iy1 = Math.min(image.height, box.y + box.side);
  const rx0 = Math.round((ix0 - box.x) * scale);
  const ry0 = Math.round((iy0 - box.y) * scale);
  const rx1 = Math.min(size, Math.round((ix1 - box.x) * scale));
  const ry1 = Math.min(size, Math.round((iy1 - box.y) * scale));
  const pad = { r: padValue, g: padValue, b: padValue };
  if (ix1 <= ix0 || iy1 <= iy0 || rx1 <= rx0 || ry1 <= ry0) {
    return new Uint8Array(size * size * 3).fill(padValue);
  }
  const { data, info } = await sharp(image.data, {
    raw: { width: image.width, height: image.height, channels: image.channels as 3 },
  })
    .extract({ left: ix0, top: iy0, width: ix1 - ix0, height: iy1 - iy0 })
    .resize(rx1 - rx0, ry1 - ry0, { fit: "fill", kernel: "lanczos3" })
    .extend({ left: rx0, top: ry0, right: size - rx1, bottom: size - ry1, background: pad })
    .raw()
    .toBuffer({ resolveWithObject: true });
  if (info.width !== size || info.height !== size || info.channels !== 3) {
    throw new Error(`cropResize produced ${info.width}x${info.height}x${info.channels}, expected ${size}x${size}x3`);
  }
  return data;
}

/**
 * letterboxBox is the square box whose S x S rendering is the centred letterbox of a
 * width x height image: side = the longer side, the shorter one centred.
 */
export function letterboxBox(width: number, height: number): SquareBox {
  const side = Math.max(width, height);
  return { x: Math.floor((width - side) / 2), y: Math.floor((height - side) / 2), side };
}

/**
 * preprocessLetterbox resizes the whole image keeping its aspect so that the longer side is S,
 * centred on padding (SPEC letterbox "center"), and returns the tensor.
 */
export async function preprocessLetterbox(image: RawImage, spec: TensorSpec): Promise<Preprocessed> {
  const box = letterboxBox(image.width, image.height);
  const rgb = await cropResize(image, box, spec.inputSize, spec.padValue);
  return { tensor: toTensor(rgb, spec), box };
}

/** preprocessCrop renders the square palm crop `box` at model resolution and returns the tensor. */
export async function preprocessCrop(image: RawImage, box: SquareBox, spec: TensorSpec): Promise<Preprocessed> {
  const rgb = await cropResize(image, box, spec.inputSize, spec.padValue);
  return { tensor: toTensor(rgb, spec), box };
}
