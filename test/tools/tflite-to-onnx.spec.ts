import * as ort from "onnxruntime-node";
import { describe, expect, it } from "vitest";
import { buildHandModels } from "../../tools/hand-models/build-hand-models.js";
import { halfToFloat32, convertTfliteToOnnx, ConversionError } from "../../tools/hand-models/tflite-to-onnx.js";
import type { TfliteModel, TfliteOperator } from "../../tools/hand-models/tflite-reader.js";

// Small TFLite graphs built by hand (the converter takes the parsed form), run through onnxruntime
// and compared with straightforward NHWC reference implementations of TFLite's kernels.

interface Spec {
  input: number[];
  consts: { shape: number[]; data: number[]; type?: "FLOAT32" | "FLOAT16" | "INT32" }[];
  /** Operators; tensor ids: 0 = input, 1..k = consts, then intermediate/outputs declared in `tensors`. */
  ops: { op: string; inputs: number[]; outputs: number[]; options?: TfliteOperator["options"] }[];
  tensors: number[][];
  outputs: number[];
}

function f16bits(x: number): number {
  // Exact for the small integers and halves used here.
  const f = new Float32Array([x]);
  const i = new Uint32Array(f.buffer)[0];
  const sign = (i >>> 16) & 0x8000;
  const exp = ((i >>> 23) & 0xff) - 127 + 15;
  const mant = (i >>> 13) & 0x3ff;
  if (x === 0) return sign;
  return sign | (exp << 10) | mant;
}

function model(s: Spec): TfliteModel {
  const tensors: TfliteModel["tensors"] = [];
  const buffers: Uint8Array[] = [new Uint8Array(0)];
  tensors.push({ index: 0, name: "in", shape: s.input, type: "FLOAT32", buffer: 0 });
  for (const c of s.consts) {
    const type = c.type ?? "FLOAT32";
    const bytes =
      type === "FLOAT32"
        ? new Uint8Array(Float32Array.from(c.data).buffer)
        : type === "INT32"
          ? new Uint8Array(Int32Array.from(c.data).buffer)
          : new Uint8Array(Uint16Array.from(c.data.map(f16bits)).buffer);
    buffers.push(bytes);
    tensors.push({ index: tensors.length, name: `c${tensors.length}`, shape: c.shape, type, buffer: buffers.length - 1 });
  }
  for (const shape of s.tensors) tensors.push({ index: tensors.length, name: `t${tensors.length}`, shape, type: "FLOAT32", buffer: 0 });
  return {
    version: 3,
    description: "test",
    tensors,
    inputs: [0],
    outputs: s.outputs,
    operators: s.ops.map((o) => ({ ...o, options: o.options ?? {} })),
    buffers,
  };
}

/** run converts `m`, feeds the NHWC `input` (transposed to the ONNX model's NCHW) and returns the first output. */
async function run(m: TfliteModel, input: Float32Array): Promise<{ data: Float32Array; dims: readonly number[] }> {
  const [n, h, w, c] = m.tensors[0].shape;
  const nchw = new Float32Array(input.length);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) for (let k = 0; k < c; k++) nchw[(k * h + y) * w + x] = input[(y * w + x) * c + k];
  const session = await ort.InferenceSession.create(convertTfliteToOnnx(m, { outputNames: ["out"] }));
  const out = (await session.run({ input: new ort.Tensor("float32", nchw, [n, c, h, w]) })).out;
  await session.release();
  return { data: out.data as Float32Array, dims: out.dims };
}

function seq(n: number, f: (i: number) => number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => f(i));
}

/** convRef is TFLite's CONV_2D / DEPTHWISE_CONV_2D (multiplier 1) in NHWC with SAME or VALID padding. */
function convRef(
  x: Float32Array,
  [h, w, c]: number[],
  wt: Float32Array,
  [o, kh, kw]: number[],
  bias: Float32Array,
  stride: number,
  same: boolean,
  depthwise: boolean,
): { data: Float32Array; shape: number[] } {
  const oh = same ? Math.ceil(h / stride) : Math.floor((h - kh) / stride) + 1;
  const ow = same ? Math.ceil(w / stride) : Math.floor((w - kw) / stride) + 1;
  const pt = same ? Math.floor(Math.max((oh - 1) * stride + kh - h, 0) / 2) : 0;
  const pl = same ? Math.floor(Math.max((ow - 1) * stride + kw - w, 0) / 2) : 0;
  const out = new Float32Array(oh * ow * o);
  for (let y = 0; y < oh; y++)
    for (let xx = 0; xx < ow; xx++)
      for (let k = 0; k < o; k++) {
        let acc = bias[k];
        for (let i = 0; i < kh; i++)
          for (let j = 0; j < kw; j++) {
            const iy = y * stride + i - pt;
            const ix = xx * stride + j - pl;
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            if (depthwise) acc += x[(iy * w + ix) * c + k] * wt[(i * kw + j) * o + k];
            else for (let q = 0; q < c; q++) acc += x[(iy * w + ix) * c + q] * wt[((k * kh + i) * kw + j) * c + q];
          }
        out[(y * ow + xx) * o + k] = acc;
      }
  return { data: out, shape: [1, oh, ow, o] };
}

function expectClose(a: Float32Array, b: Float32Array, tol = 1e-4) {
  expect(a.length).toBe(b.length);
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i] - b[i]));
  expect(worst).toBeLessThan(tol);
}

describe("halfToFloat32()", () => {
  it("decodes binary16: 1, -2, 0.5, 65504, the smallest subnormal, infinity", () => {
    const bits = [0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x7c00];
    const out = halfToFloat32(new Uint8Array(Uint16Array.from(bits).buffer));
    expect(Array.from(out)).toEqual([1, -2, 0.5, 65504, 2 ** -24, Infinity]);
  });
});

describe("convertTfliteToOnnx() against reference kernels", () => {
  it("CONV_2D, stride 2, SAME padding on an odd size (the extra row/column at the end), fp16 weights via DEQUANTIZE, fused RELU6", async () => {
    const x = seq(5 * 5 * 2, (i) => Math.sin(i) * 3);
    const wt = seq(3 * 3 * 3 * 2, (i) => ((i * 7) % 11) / 4 - 1.25);
    const bias = Float32Array.of(0.5, -1, 2);
    const ref = convRef(x, [5, 5, 2], wt, [3, 3, 3], bias, 2, true, false);
    const m = model({
      input: [1, 5, 5, 2],
      consts: [
        { shape: [3, 3, 3, 2], data: Array.from(wt), type: "FLOAT16" },
        { shape: [3], data: Array.from(bias) },
      ],
      tensors: [
        [3, 3, 3, 2],
        [1, 3, 3, 3],
      ],
      ops: [
        { op: "DEQUANTIZE", inputs: [1], outputs: [3] },
        {
          op: "CONV_2D",
          inputs: [0, 3, 2],
          outputs: [4],
          options: { padding: 0, strideW: 2, strideH: 2, activation: 3, dilationW: 1, dilationH: 1 },
        },
      ],
      outputs: [4],
    });
    const out = await run(m, x);
    expect(out.dims).toEqual([1, 3, 3, 3]); // rank-4 outputs come back NHWC
    expectClose(
      out.data,
      ref.data.map((v) => Math.min(6, Math.max(0, v))),
    );
  });

  it("DEPTHWISE_CONV_2D with PRELU, then a RESHAPE that flattens in NHWC order", async () => {
    const x = seq(4 * 4 * 3, (i) => Math.cos(i) * 2);
    const wt = seq(3 * 3 * 3, (i) => (i % 5) / 5 - 0.3);
    const bias = Float32Array.of(0, 0.25, -0.25);
    const ref = convRef(x, [4, 4, 3], wt, [3, 3, 3], bias, 1, true, true);
    const alpha = [0.1, 0.2, 0.3];
    const prelu = ref.data.map((v, i) => (v >= 0 ? v : v * alpha[i % 3]));
    const m = model({
      input: [1, 4, 4, 3],
      consts: [
        { shape: [1, 3, 3, 3], data: Array.from(wt) },
        { shape: [3], data: Array.from(bias) },
        { shape: [1, 1, 3], data: alpha },
        { shape: [3], data: [1, 48, 1], type: "INT32" },
      ],
      tensors: [
        [1, 4, 4, 3],
        [1, 4, 4, 3],
        [1, 48, 1],
      ],
      ops: [
        {
          op: "DEPTHWISE_CONV_2D",
          inputs: [0, 1, 2],
          outputs: [5],
          options: { padding: 0, strideW: 1, strideH: 1, depthMultiplier: 1, activation: 0 },
        },
        { op: "PRELU", inputs: [5, 3], outputs: [6] },
        { op: "RESHAPE", inputs: [6, 4], outputs: [7] },
      ],
      outputs: [7],
    });
    const out = await run(m, x);
    expect(out.dims).toEqual([1, 48, 1]);
    expectClose(out.data, prelu);
  });

  it("channel PAD, MAX_POOL_2D, ADD, RESIZE_BILINEAR with half-pixel centres, CONCATENATION on channels", async () => {
    const x = seq(4 * 4 * 1, (i) => i);
    const m = model({
      input: [1, 4, 4, 1],
      consts: [
        { shape: [4, 2], data: [0, 0, 0, 0, 0, 0, 0, 1], type: "INT32" },
        { shape: [2], data: [4, 4], type: "INT32" },
      ],
      tensors: [
        [1, 4, 4, 2],
        [1, 2, 2, 2],
        [1, 2, 2, 2],
        [1, 4, 4, 2],
        [1, 4, 4, 4],
      ],
      ops: [
        { op: "PAD", inputs: [0, 1], outputs: [3] },
        {
          op: "MAX_POOL_2D",
          inputs: [3],
          outputs: [4],
          options: { padding: 1, strideW: 2, strideH: 2, filterW: 2, filterH: 2, activation: 0 },
        },
        { op: "ADD", inputs: [4, 4], outputs: [5], options: { activation: 0 } },
        { op: "RESIZE_BILINEAR", inputs: [5, 2], outputs: [6], options: { alignCorners: false, halfPixelCenters: true } },
        { op: "CONCATENATION", inputs: [6, 3], outputs: [7], options: { axis: 3, activation: 0 } },
      ],
      outputs: [7],
    });
    const out = await run(m, x);
    expect(out.dims).toEqual([1, 4, 4, 4]);
    // Pooled channel 0: max of each 2x2 block of 0..15 = [5, 7, 13, 15]; doubled = [10, 14, 26, 30].
    const pooled = [10, 14, 26, 30];
    // TF half-pixel bilinear 2 -> 4: source coordinate (i + 0.5) / 2 - 0.5, clamped to the edge.
    const src = [0, 0.25, 0.75, 1];
    for (let y = 0; y < 4; y++)
      for (let xx = 0; xx < 4; xx++) {
        const fy = src[y];
        const fx = src[xx];
        const top = pooled[0] * (1 - fx) + pooled[1] * fx;
        const bottom = pooled[2] * (1 - fx) + pooled[3] * fx;
        const at = (y * 4 + xx) * 4;
        expect(out.data[at]).toBeCloseTo(top * (1 - fy) + bottom * fy, 4);
        expect(out.data[at + 1]).toBe(0); // the padded channel, resized
        expect(out.data[at + 2]).toBe(y * 4 + xx); // the input, concatenated
        expect(out.data[at + 3]).toBe(0);
      }
  });

  it("MEAN over height and width, FULLY_CONNECTED and LOGISTIC", async () => {
    const x = seq(2 * 2 * 3, (i) => i / 4);
    const w = [0.5, -1, 2, 1, 1, 1];
    const m = model({
      input: [1, 2, 2, 3],
      consts: [
        { shape: [2], data: [1, 2], type: "INT32" },
        { shape: [2, 3], data: w },
        { shape: [2], data: [0.1, -0.2] },
      ],
      tensors: [
        [1, 3],
        [1, 2],
        [1, 2],
      ],
      ops: [
        { op: "MEAN", inputs: [0, 1], outputs: [4], options: { keepDims: false } },
        { op: "FULLY_CONNECTED", inputs: [4, 2, 3], outputs: [5], options: { activation: 0, keepNumDims: false } },
        { op: "LOGISTIC", inputs: [5], outputs: [6] },
      ],
      outputs: [6],
    });
    const mean = [0, 1, 2].map((c) => (x[c] + x[3 + c] + x[6 + c] + x[9 + c]) / 4);
    const fc = [0, 1].map((o) => mean.reduce((a, v, i) => a + v * w[o * 3 + i], o === 0 ? 0.1 : -0.2));
    const out = await run(m, x);
    expect(out.dims).toEqual([1, 2]);
    expectClose(out.data, Float32Array.from(fc.map((v) => 1 / (1 + Math.exp(-v)))), 1e-5);
  });

  it("refuses an operator it does not translate", () => {
    const m = model({
      input: [1, 2, 2, 1],
      consts: [],
      tensors: [[1, 2, 2, 1]],
      ops: [{ op: "SOFTMAX", inputs: [0], outputs: [1] }],
      outputs: [1],
    });
    expect(() => convertTfliteToOnnx(m)).toThrow(ConversionError);
  });
});

describe("the converted hand models", () => {
  it("load in onnxruntime-node with NCHW inputs and MediaPipe's output shapes", async () => {
    const { palmPath, landmarkPath } = await buildHandModels();
    const palm = await ort.InferenceSession.create(palmPath);
    const lm = await ort.InferenceSession.create(landmarkPath);
    try {
      expect(palm.inputNames).toEqual(["input"]);
      expect(palm.outputNames).toEqual(["boxes", "scores"]);
      expect(lm.outputNames).toEqual(["landmarks", "presence", "handedness", "world_landmarks"]);
      const p = await palm.run({ input: new ort.Tensor("float32", new Float32Array(3 * 192 * 192), [1, 3, 192, 192]) });
      expect(p.boxes.dims).toEqual([1, 2016, 18]);
      expect(p.scores.dims).toEqual([1, 2016, 1]);
      const l = await lm.run({ input: new ort.Tensor("float32", new Float32Array(3 * 224 * 224).fill(0.5), [1, 3, 224, 224]) });
      expect(l.landmarks.dims).toEqual([1, 63]);
      expect(l.presence.dims).toEqual([1, 1]);
      expect(l.handedness.dims).toEqual([1, 1]);
      expect(l.world_landmarks.dims).toEqual([1, 63]);
      // A grey image has no hand in it.
      expect((l.presence.data as Float32Array)[0]).toBeLessThan(0.1);
    } finally {
      await palm.release();
      await lm.release();
    }
  });
});
