/**
 * Model metadata: reads the ONNX `metadata_props` straight from the protobuf bytes
 * (onnxruntime-node does not expose them) and validates them into {@link ModelMetadata}.
 */
import { FRAME_SIDE } from "../landmarks/palm-frame.js";
import { LINE_NAMES } from "./analyzer-types.js";

/** ModelMetadataError is thrown when a model file is malformed or lacks required metadata. */
export class ModelMetadataError extends Error {
  override name = "ModelMetadataError";
}

/** Normalization maps a pixel p (0..255) to `(p / scale - mean[c]) / std[c]`. */
export interface Normalization {
  scale: number;
  mean: [number, number, number];
  std: [number, number, number];
}

/** ModelMetadata is the validated contract of a palm-lines ONNX model. */
export interface ModelMetadata {
  /** `${model_name}-${model_version}`, the `model` field of every result. */
  model: string;
  /** Square input side S in pixels; the input is [1,3,S,S] and the output [1,4,S,S]. */
  inputSize: number;
  /** Channel order of the input tensor. */
  channelOrder: "RGB" | "BGR";
  normalization: Normalization;
  /** Letterbox padding value in pixel units (0..255), centred placement. */
  letterboxPad: number;
  /** Index of each output channel in the model output. */
  channels: { palm: number; heart: number; head: number; life: number };
  /** Decision thresholds on the sigmoid probabilities. */
  thresholds: { palm: number; heart: number; head: number; life: number };
  /**
   * Per line, the lower threshold a detected line is followed along (hysteresis: pixels above it
   * connected to the kept line, near the palm, join it). Equal to the line's threshold when the
   * optional `grow` metadata is absent: no growth.
   */
  grow: { heart: number; head: number; life: number };
  /**
   * A line is detected when its kept component has at least `minPixels` (model resolution, crop
   * pass) and mean probability at least `minConfidence`; an image with fewer than `minLines`
   * lines detected that way reports none (a lone crease is what a back of hand most often shows).
   */
  detection: { minPixels: number; minConfidence: number; minLines: number };
  /**
   * The line model must confirm the landmarker's palm: its palm channel's largest component must
   * cover at least this share of the palm frame's view (0..1), or the image is treated as
   * palm-free. 0 disables it. From `crop.min_palm` (the key's name dates from the two-pass engine).
   */
  cropMinPalm: number;
  /**
   * The palm frame's side in units of the palm's size that the model was trained on (`frame_side`;
   * {@link FRAME_SIDE} when absent): a smaller one shows the palm larger in the same view.
   */
  frameSide: number;
  /** All raw metadata_props, for diagnostics. */
  raw: Readonly<Record<string, string>>;
}

function readVarint(buf: Uint8Array, pos: number): [number, number] {
  let result = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (pos >= buf.length) throw new ModelMetadataError("truncated varint");
    const b = buf[pos++];
    result += (b & 0x7f) * mul;
    if ((b & 0x80) === 0) return [result, pos];
    mul *= 128;
  }
  throw new ModelMetadataError("varint too long");
}

/** Skips one field of the given wire type, returning the new position. */
function skipField(buf: Uint8Array, pos: number, wireType: number): number {
  switch (wireType) {
    case 0:
      return readVarint(buf, pos)[1];
    case 1:
      return pos + 8;
    case 2: {
      const [len, p] = readVarint(buf, pos);
      return p + len;
    }
    case 5:
      return pos + 4;
    default:
      throw new ModelMetadataError(`unsupported protobuf wire type ${wireType}`);
  }
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * readOnnxMetadataProps scans the top level of an ONNX ModelProto for field 14
 * (`metadata_props`, repeated StringStringEntryProto with key = 1 and value = 2) and returns
 * them as a record. Throws {@link ModelMetadataError} for bytes that are not a protobuf message.
 */
export function readOnnxMetadataProps(bytes: Uint8Array): Record<string, string> {
  const props: Record<string, string> = {};
  let pos = 0;
  let sawGraph = false;
  while (pos < bytes.length) {
    const [tag, p] = readVarint(bytes, pos);
    const field = Math.floor(tag / 8);
    const wireType = tag & 7;
    if (field === 0) throw new ModelMetadataError("invalid protobuf field number 0");
    if (field === 7 && wireType === 2) sawGraph = true;
    if (field === 14 && wireType === 2) {
      const [len, start] = readVarint(bytes, p);
      const end = start + len;
      if (end > bytes.length) throw new ModelMetadataError("truncated metadata entry");
      let key = "";
      let value = "";
      let q = start;
      while (q < end) {
        const [t, q1] = readVarint(bytes, q);
        if ((t & 7) === 2 && (t >>> 3 === 1 || t >>> 3 === 2)) {
          const [l, s] = readVarint(bytes, q1);
          if (s + l > end) throw new ModelMetadataError("truncated metadata string");
          const str = utf8.decode(bytes.subarray(s, s + l));
          if (t >>> 3 === 1) key = str;
          else value = str;
          q = s + l;
        } else {
          q = skipField(bytes, q1, t & 7);
        }
      }
      props[key] = value;
      pos = end;
    } else {
      pos = skipField(bytes, p, wireType);
    }
    if (pos > bytes.length) throw new ModelMetadataError("truncated protobuf message");
  }
  if (!sawGraph) throw new ModelMetadataError("no graph in the file: not an ONNX model");
  return props;
}

function parseJson(props: Record<string, string>, key: string): unknown {
  const text = props[key];
  try {
    return JSON.parse(text);
  } catch {
    throw new ModelMetadataError(`metadata "${key}" is not valid JSON: ${JSON.stringify(text)}`);
  }
}

function num(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    throw new ModelMetadataError(`metadata ${what} must be a number in [${min}, ${max}], got ${JSON.stringify(value)}`);
  }
  return value;
}

function triple(value: unknown, what: string): [number, number, number] {
  if (!Array.isArray(value) || value.length !== 3) {
    throw new ModelMetadataError(`metadata ${what} must be an array of 3 numbers`);
  }
  return [num(value[0], what, -1e6, 1e6), num(value[1], what, -1e6, 1e6), num(value[2], what, -1e6, 1e6)];
}

const REQUIRED_KEYS = ["model_name", "model_version", "input_size", "output_names", "thresholds"] as const;

/** DEFAULT_DETECTION applies when the optional `detection` metadata is absent. */
export const DEFAULT_DETECTION = Object.freeze({ minPixels: 20, minConfidence: 0.5, minLines: 1 });
/** DEFAULT_CROP_MIN_PALM applies when `crop.min_palm` is absent: no confirmation by the line model. */
export const DEFAULT_CROP_MIN_PALM = 0;

/**
 * parseModelMetadata validates raw metadata_props into {@link ModelMetadata}. Required keys:
 * `model_name`, `model_version`, `input_size`, `output_names` (must name palm, heart, head and
 * life), `thresholds`. Optional keys and their defaults: `channel_order` "RGB",
 * `normalization` {scale 255, mean 0, std 1}, `letterbox` "center,pad=0", `detection`
 * {@link DEFAULT_DETECTION}, `crop` {min_palm {@link DEFAULT_CROP_MIN_PALM}; its `margin` and
 * `proposal`, read by the retired two-pass engine, are ignored}, `grow` (per line, at most its
 * threshold; default the threshold), `frame_side` (in [1, 3]; default {@link FRAME_SIDE}).
 * Throws {@link ModelMetadataError} naming the offending key.
 */
export function parseModelMetadata(props: Record<string, string>): ModelMetadata {
  for (const key of REQUIRED_KEYS) {
    if (typeof props[key] !== "string" || props[key].trim() === "") {
      throw new ModelMetadataError(`required metadata "${key}" is missing`);
    }
  }
  const inputSize = Number(props.input_size);
  if (!Number.isInteger(inputSize) || inputSize < 32 || inputSize > 2048) {
    throw new ModelMetadataError(`metadata "input_size" must be an integer in [32, 2048], got ${JSON.stringify(props.input_size)}`);
  }
  const channelOrder = (props.channel_order ?? "RGB").trim().toUpperCase();
  if (channelOrder !== "RGB" && channelOrder !== "BGR") {
    throw new ModelMetadataError(`metadata "channel_order" must be RGB or BGR, got ${JSON.stringify(props.channel_order)}`);
  }

  let normalization: Normalization = { scale: 255, mean: [0, 0, 0], std: [1, 1, 1] };
  if (props.normalization !== undefined) {
    const n = parseJson(props, "normalization") as Record<string, unknown> | null;
    if (n === null || typeof n !== "object") throw new ModelMetadataError(`metadata "normalization" must be an object`);
    normalization = {
      scale: n.scale === undefined ? 255 : num(n.scale, "normalization.scale", 1e-6, 1e6),
      mean: n.mean === undefined ? [0, 0, 0] : triple(n.mean, "normalization.mean"),
      std: n.std === undefined ? [1, 1, 1] : triple(n.std, "normalization.std"),
    };
    if (normalization.std.some((s) => s === 0)) throw new ModelMetadataError(`metadata "normalization.std" must not contain 0`);
  }

  let letterboxPad = 0;
  if (props.letterbox !== undefined) {
    const parts = props.letterbox.split(",").map((s) => s.trim().toLowerCase());
    if (parts[0] !== "center" && parts[0] !== "centre") {
      throw new ModelMetadataError(`metadata "letterbox" must start with "center", got ${JSON.stringify(props.letterbox)}`);
    }
    for (const part of parts.slice(1)) {
      const m = /^pad=(\d+(?:\.\d+)?)$/.exec(part);
      if (!m) throw new ModelMetadataError(`metadata "letterbox" has an unknown part ${JSON.stringify(part)}`);
      letterboxPad = num(Number(m[1]), "letterbox pad", 0, 255);
    }
  }

  const names = props.output_names.split(",").map((s) => s.trim());
  const idx = (name: string): number => {
    const i = names.indexOf(name);
    if (i < 0) throw new ModelMetadataError(`metadata "output_names" lacks "${name}": ${JSON.stringify(props.output_names)}`);
    return i;
  };
  const channels = { palm: idx("palm"), heart: idx("heart"), head: idx("head"), life: idx("life") };

  const t = parseJson(props, "thresholds") as Record<string, unknown> | null;
  if (t === null || typeof t !== "object") throw new ModelMetadataError(`metadata "thresholds" must be an object`);
  const thr = (k: string): number => num(t[k], `thresholds.${k}`, 0, 1);
  const thresholds = { palm: thr("palm"), heart: thr("heart"), head: thr("head"), life: thr("life") };

  const grow = { heart: thresholds.heart, head: thresholds.head, life: thresholds.life };
  if (props.grow !== undefined) {
    const g = parseJson(props, "grow") as Record<string, unknown> | null;
    if (g === null || typeof g !== "object") throw new ModelMetadataError(`metadata "grow" must be an object`);
    for (const line of LINE_NAMES) if (g[line] !== undefined) grow[line] = num(g[line], `grow.${line}`, 0, thresholds[line]);
  }

  const detection: ModelMetadata["detection"] = { ...DEFAULT_DETECTION };
  if (props.detection !== undefined) {
    const d = parseJson(props, "detection") as Record<string, unknown> | null;
    if (d === null || typeof d !== "object") throw new ModelMetadataError(`metadata "detection" must be an object`);
    if (d.min_pixels !== undefined) detection.minPixels = num(d.min_pixels, "detection.min_pixels", 0, inputSize * inputSize);
    if (d.min_confidence !== undefined) detection.minConfidence = num(d.min_confidence, "detection.min_confidence", 0, 1);
    if (d.min_lines !== undefined) {
      detection.minLines = num(d.min_lines, "detection.min_lines", 1, LINE_NAMES.length);
      if (!Number.isInteger(detection.minLines)) throw new ModelMetadataError(`metadata detection.min_lines must be an integer`);
    }
  }

  let cropMinPalm = DEFAULT_CROP_MIN_PALM;
  if (props.crop !== undefined) {
    const c = parseJson(props, "crop") as Record<string, unknown> | null;
    if (c === null || typeof c !== "object") throw new ModelMetadataError(`metadata "crop" must be an object`);
    if (c.min_palm !== undefined) cropMinPalm = num(c.min_palm, "crop.min_palm", 0, 1);
  }

  // The line rules stay shares of S at any frame side (line-rules.json); evaluate.py calibrates with the same.
  const frameSide = props.frame_side === undefined ? FRAME_SIDE : Number(props.frame_side);
  if (!(frameSide >= 1 && frameSide <= 3)) {
    throw new ModelMetadataError(`metadata "frame_side" must be a number in [1, 3], got ${JSON.stringify(props.frame_side)}`);
  }

  return {
    model: `${props.model_name.trim()}-${props.model_version.trim()}`,
    inputSize,
    channelOrder,
    normalization,
    letterboxPad,
    channels,
    thresholds,
    grow,
    detection,
    cropMinPalm,
    frameSide,
    raw: Object.freeze({ ...props }),
  };
}
