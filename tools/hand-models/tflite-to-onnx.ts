/**
 * TFLite -> ONNX: translates the float graphs of MediaPipe's palm detector and hand-landmark
 * models (CONV_2D, DEPTHWISE_CONV_2D, ADD, PRELU, MAX/AVERAGE_POOL_2D, PAD, RESIZE_BILINEAR,
 * RESHAPE, CONCATENATION, MEAN, FULLY_CONNECTED, LOGISTIC, DEQUANTIZE of fp16 constants) into an
 * ONNX graph (opset 13) that onnxruntime runs.
 *
 * Layout: TFLite is NHWC, ONNX convolutions are NCHW. Every rank-4 activation lives in NCHW in
 * the ONNX graph; weights are transposed once at conversion; axis arguments (PAD, CONCATENATION,
 * MEAN) are mapped; a RESHAPE or FULLY_CONNECTED that reads a rank-4 tensor first transposes it
 * back to NHWC so that the flattening order is TFLite's. The ONNX model's input is NCHW
 * [1, C, H, W]; outputs keep TFLite's shapes. TFLite's SAME padding (the extra pixel, when odd,
 * at the end) becomes explicit pads computed from the static shapes; fused activations become
 * Relu / Clip nodes; fp16 weights are dequantized to float32 here (constant folding).
 */
import { encodeOnnxModel, type OnnxAttributeValue, type OnnxGraph, type OnnxInitializer, type OnnxNode } from "./onnx-writer.js";
import type { TfliteModel, TfliteOperator, TfliteTensor } from "./tflite-reader.js";

/** ConversionError is thrown for a graph with an operator or pattern this converter does not translate. */
export class ConversionError extends Error {
  override name = "ConversionError";
}

/** ConvertOptions configure {@link convertTfliteToOnnx}. */
export interface ConvertOptions {
  /** ONNX graph name. Default "converted". */
  graphName?: string;
  /** Name of the (single) ONNX input. Default "input". */
  inputName?: string;
  /** Names for the ONNX outputs, in TFLite output order. Default: the TFLite tensor names. */
  outputNames?: string[];
  /** metadata_props written into the model. */
  metadata?: Record<string, string>;
}

type Const = { shape: number[]; data: Float32Array } | { shape: number[]; ints: Int32Array };

interface Value {
  name: string;
  /** True for a rank-4 activation held in NCHW order. */
  nchw: boolean;
  /** TFLite (NHWC) shape. */
  shape: number[];
}

const HALF_TABLE = (() => {
  const t = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const s = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const f = h & 0x3ff;
    t[h] = e === 0 ? s * f * 2 ** -24 : e === 31 ? (f ? NaN : s * Infinity) : s * (1 + f / 1024) * 2 ** (e - 15);
  }
  return t;
})();

/** halfToFloat32 decodes little-endian IEEE-754 binary16 values. */
export function halfToFloat32(bytes: Uint8Array): Float32Array {
  const n = bytes.length >> 1;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = HALF_TABLE[bytes[2 * i] | (bytes[2 * i + 1] << 8)];
  return out;
}

function product(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** permute4 transposes a rank-4 row-major array: output dim i is input dim perm[i]. */
function permute4(data: Float32Array, shape: readonly number[], perm: readonly number[]): { data: Float32Array; shape: number[] } {
  const outShape = perm.map((p) => shape[p]);
  const inStrides = [shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1];
  const s = perm.map((p) => inStrides[p]);
  const out = new Float32Array(data.length);
  let o = 0;
  for (let a = 0; a < outShape[0]; a++)
    for (let b = 0; b < outShape[1]; b++)
      for (let c = 0; c < outShape[2]; c++)
        for (let d = 0; d < outShape[3]; d++) out[o++] = data[a * s[0] + b * s[1] + c * s[2] + d * s[3]];
  return { data: out, shape: outShape };
}

const TO_NCHW = [0, 3, 1, 2];
const TO_NHWC = [0, 2, 3, 1];
/** NHWC axis -> NCHW axis. */
const AXIS_TO_NCHW = [0, 2, 3, 1];

/** samePads gives [begin, end] padding of TFLite's SAME scheme along one axis (static shapes). */
function samePads(inSize: number, outSize: number, kernel: number, stride: number, dilation: number): [number, number] {
  const total = Math.max((outSize - 1) * stride + (kernel - 1) * dilation + 1 - inSize, 0);
  const begin = Math.floor(total / 2);
  return [begin, total - begin];
}

/**
 * convertTfliteToOnnx translates a parsed TFLite model (see `readTflite`) into ONNX model bytes.
 * Throws {@link ConversionError} for anything outside the supported operator set.
 */
/** FloatConst and the helpers of {@link Graph} that operator translations use. */
type FloatConst = { shape: number[]; data: Float32Array };

/**
 * Graph is the ONNX graph being built from a TFLite model: its nodes and initializers, the
 * TFLite tensors already translated (values) or known constants, and the helpers each operator's
 * translation uses. Names are numbered in creation order, so a conversion is deterministic.
 */
class Graph {
  readonly nodes: OnnxNode[] = [];
  readonly initializers: OnnxInitializer[] = [];
  readonly consts = new Map<number, Const>();
  readonly values = new Map<number, Value>();
  #uid = 0;

  constructor(readonly model: TfliteModel) {}

  get tensors(): TfliteTensor[] {
    return this.model.tensors;
  }

  fresh(base: string): string {
    return `${base}_${this.#uid++}`;
  }

  constOf(t: TfliteTensor): Const | undefined {
    const known = this.consts.get(t.index);
    if (known) return known;
    const raw = this.model.buffers[t.buffer];
    if (!raw || raw.length === 0) return undefined;
    let c: Const;
    if (t.type === "FLOAT32") c = { shape: t.shape, data: new Float32Array(new Uint8Array(raw).buffer) };
    else if (t.type === "FLOAT16") c = { shape: t.shape, data: halfToFloat32(raw) };
    else if (t.type === "INT32") c = { shape: t.shape, ints: new Int32Array(new Uint8Array(raw).buffer) };
    else throw new ConversionError(`constant tensor ${t.name} has unsupported type ${t.type}`);
    this.consts.set(t.index, c);
    return c;
  }

  floatConst(i: number, what: string): FloatConst {
    const c = this.constOf(this.tensors[i]);
    if (!c || !("data" in c)) throw new ConversionError(`${what} (${this.tensors[i].name}) must be a float constant`);
    return c;
  }

  intConst(i: number, what: string): number[] {
    const c = this.constOf(this.tensors[i]);
    if (!c || !("ints" in c)) throw new ConversionError(`${what} (${this.tensors[i].name}) must be an int32 constant`);
    return Array.from(c.ints);
  }

  addFloat(base: string, dims: number[], data: Float32Array): string {
    const name = this.fresh(base);
    this.initializers.push({ name, dims, data });
    return name;
  }

  addInt64(base: string, values: readonly number[]): string {
    const name = this.fresh(base);
    this.initializers.push({ name, dims: [values.length], data: BigInt64Array.from(values.map((v) => BigInt(v))) });
    return name;
  }

  node(opType: string, inputs: string[], attributes?: Record<string, OnnxAttributeValue>, out?: string): string {
    const output = out ?? this.fresh(opType.toLowerCase());
    this.nodes.push({ opType, inputs, outputs: [output], name: output, attributes });
    return output;
  }

  /** valueAt is tensor `i` as an ONNX value; a float constant used as an operand becomes an initializer (NCHW when rank 4). */
  valueAt(i: number): Value {
    const v = this.values.get(i);
    if (v) return v;
    const c = this.constOf(this.tensors[i]);
    if (c && "data" in c) {
      const rank4 = c.shape.length === 4;
      const t = rank4 ? permute4(c.data, c.shape, TO_NCHW) : { data: c.data, shape: c.shape };
      const cv = { name: this.addFloat(`const${i}`, t.shape, t.data), nchw: rank4, shape: c.shape };
      this.values.set(i, cv);
      return cv;
    }
    throw new ConversionError(`tensor ${this.tensors[i].name} is read before it is produced`);
  }

  /** setOut records `name` as the value of `op`'s (first) output. */
  setOut(op: TfliteOperator, name: string, nchw: boolean): void {
    const t = this.tensors[op.outputs[0]];
    this.values.set(t.index, { name, nchw: nchw && t.shape.length === 4, shape: t.shape });
  }

  /** activation appends TFLite's fused activation `code` (0 none, 1 RELU, 2 RELU_N1_TO_1, 3 RELU6, 4 TANH). */
  activation(name: string, code: number): string {
    switch (code) {
      case 0:
        return name;
      case 1:
        return this.node("Relu", [name]);
      case 2:
        return this.node("Clip", [name, this.addFloat("min", [], Float32Array.of(-1)), this.addFloat("max", [], Float32Array.of(1))]);
      case 3:
        return this.node("Clip", [name, this.addFloat("min", [], Float32Array.of(0)), this.addFloat("max", [], Float32Array.of(6))]);
      case 4:
        return this.node("Tanh", [name]);
      default:
        throw new ConversionError(`fused activation ${code} is not supported`);
    }
  }

  /** inTfliteOrder gives the value in TFLite's own memory order (undoing NCHW for rank 4). */
  inTfliteOrder(v: Value): string {
    return v.nchw ? this.node("Transpose", [v.name], { perm: TO_NHWC }) : v.name;
  }
}

/** OpOptions are a TFLite operator's builtin options, read by name. */
type OpOptions = Record<string, number & boolean & number[]>;

/** Translate adds the ONNX nodes of one TFLite operator to `g`. */
type Translate = (g: Graph, op: TfliteOperator, o: OpOptions, outT: TfliteTensor) => void;

const dequantize: Translate = (g, op, _o, outT) => {
  const src = g.tensors[op.inputs[0]];
  const c = g.constOf(src);
  if (!c || !("data" in c)) throw new ConversionError(`DEQUANTIZE of non-constant ${src.name} is not supported`);
  g.consts.set(outT.index, { shape: outT.shape, data: c.data });
};

const conv: Translate = (g, op, o, outT) => {
  const x = g.valueAt(op.inputs[0]);
  if (!x.nchw) throw new ConversionError(`${op.op} input ${g.tensors[op.inputs[0]].name} is not rank 4`);
  const w = g.floatConst(op.inputs[1], `${op.op} filter`);
  const [, kh, kw] = w.shape;
  const depthwise = op.op === "DEPTHWISE_CONV_2D";
  // CONV_2D filter [O, KH, KW, I] -> [O, I, KH, KW]; depthwise [1, KH, KW, C*M] -> [C*M, 1, KH, KW].
  const wt = permute4(w.data, w.shape, depthwise ? [3, 0, 1, 2] : TO_NCHW);
  const inputs = [x.name, g.addFloat("w", wt.shape, wt.data)];
  if (op.inputs.length > 2 && op.inputs[2] >= 0) {
    const b = g.floatConst(op.inputs[2], `${op.op} bias`);
    inputs.push(g.addFloat("b", [b.data.length], b.data));
  }
  const [, ih, iw, ic] = x.shape;
  const [, oh, ow] = outT.shape;
  const dh = o.dilationH || 1;
  const dw = o.dilationW || 1;
  const [pt, pb] = o.padding === 0 ? samePads(ih, oh, kh, o.strideH, dh) : [0, 0];
  const [pl, pr] = o.padding === 0 ? samePads(iw, ow, kw, o.strideW, dw) : [0, 0];
  const y = g.node("Conv", inputs, {
    kernel_shape: [kh, kw],
    strides: [o.strideH, o.strideW],
    dilations: [dh, dw],
    pads: [pt, pl, pb, pr],
    group: depthwise ? ic : 1,
  });
  g.setOut(op, g.activation(y, o.activation), true);
};

const pool: Translate = (g, op, o, outT) => {
  const x = g.valueAt(op.inputs[0]);
  const [, ih, iw] = x.shape;
  const [, oh, ow] = outT.shape;
  const [pt, pb] = o.padding === 0 ? samePads(ih, oh, o.filterH, o.strideH, 1) : [0, 0];
  const [pl, pr] = o.padding === 0 ? samePads(iw, ow, o.filterW, o.strideW, 1) : [0, 0];
  const attrs: Record<string, OnnxAttributeValue> = {
    kernel_shape: [o.filterH, o.filterW],
    strides: [o.strideH, o.strideW],
    pads: [pt, pl, pb, pr],
  };
  // TFLite's average pool divides by the number of pixels inside the image.
  if (op.op === "AVERAGE_POOL_2D") attrs.count_include_pad = 0;
  const y = g.node(op.op === "MAX_POOL_2D" ? "MaxPool" : "AveragePool", [x.name], attrs);
  g.setOut(op, g.activation(y, o.activation), true);
};

const arithmetic: Translate = (g, op, o, outT) => {
  const a = g.valueAt(op.inputs[0]);
  const b = g.valueAt(op.inputs[1]);
  const rank4 = outT.shape.length === 4;
  if (rank4 && (!a.nchw || !b.nchw) && (a.shape.length > 1 || b.shape.length > 1)) {
    // A per-channel constant [C] broadcasts on NHWC's last axis; in NCHW it must be [C,1,1].
    for (const v of [a, b]) {
      if (!v.nchw && v.shape.length > 1 && product(v.shape) !== 1) {
        throw new ConversionError(`${op.op} broadcasting ${v.shape} against rank 4 is not supported`);
      }
    }
  }
  const fix = (v: Value): string => {
    if (!rank4 || v.nchw || product(v.shape) === 1) return v.name;
    return g.node("Reshape", [v.name, g.addInt64("shape", [-1, 1, 1])]);
  };
  const onnxOp = op.op === "ADD" ? "Add" : op.op === "MUL" ? "Mul" : "Sub";
  g.setOut(op, g.activation(g.node(onnxOp, [fix(a), fix(b)]), o.activation), rank4);
};

const prelu: Translate = (g, op) => {
  const x = g.valueAt(op.inputs[0]);
  const alpha = g.floatConst(op.inputs[1], "PRELU alpha");
  let slope: string;
  if (!x.nchw) slope = g.addFloat("alpha", alpha.shape, alpha.data);
  else if (alpha.shape.length === 4) {
    const t = permute4(alpha.data, alpha.shape, TO_NCHW);
    slope = g.addFloat("alpha", t.shape, t.data);
  } else {
    const c = alpha.shape[alpha.shape.length - 1];
    if (product(alpha.shape) !== c) throw new ConversionError(`PRELU alpha ${alpha.shape} is not per-channel`);
    slope = g.addFloat("alpha", [c, 1, 1], alpha.data);
  }
  g.setOut(op, g.node("PRelu", [x.name, slope]), x.nchw);
};

const elementwise: Translate = (g, op) => {
  const x = g.valueAt(op.inputs[0]);
  const code = { RELU: 1, RELU6: 3 }[op.op as "RELU" | "RELU6"];
  const y = code ? g.activation(x.name, code) : g.node(op.op === "LOGISTIC" ? "Sigmoid" : "Tanh", [x.name]);
  g.setOut(op, y, x.nchw);
};

const pad: Translate = (g, op) => {
  const x = g.valueAt(op.inputs[0]);
  const p = g.intConst(op.inputs[1], "PAD paddings");
  const rank = x.shape.length;
  const begin = new Array<number>(rank).fill(0);
  const end = new Array<number>(rank).fill(0);
  for (let ax = 0; ax < rank; ax++) {
    const to = x.nchw ? AXIS_TO_NCHW[ax] : ax;
    begin[to] = p[2 * ax];
    end[to] = p[2 * ax + 1];
  }
  g.setOut(op, g.node("Pad", [x.name, g.addInt64("pads", [...begin, ...end])], { mode: "constant" }), x.nchw);
};

const resizeBilinear: Translate = (g, op, o, outT) => {
  const x = g.valueAt(op.inputs[0]);
  const [, oh, ow, oc] = outT.shape;
  const mode = o.alignCorners ? "align_corners" : o.halfPixelCenters ? "half_pixel" : "asymmetric";
  const y = g.node("Resize", [x.name, "", "", g.addInt64("sizes", [1, oc, oh, ow])], {
    mode: "linear",
    coordinate_transformation_mode: mode,
  });
  g.setOut(op, y, true);
};

const reshape: Translate = (g, op, _o, outT) => {
  const x = g.valueAt(op.inputs[0]);
  let y = g.node("Reshape", [g.inTfliteOrder(x), g.addInt64("shape", outT.shape)]);
  if (outT.shape.length === 4) y = g.node("Transpose", [y], { perm: TO_NCHW });
  g.setOut(op, y, true);
};

const concatenation: Translate = (g, op, o, outT) => {
  const xs = op.inputs.map((i) => g.valueAt(i));
  const rank = outT.shape.length;
  let axis = o.axis < 0 ? o.axis + rank : o.axis;
  const nchw = rank === 4;
  if (nchw && !xs.every((v) => v.nchw)) throw new ConversionError("CONCATENATION mixes layouts");
  if (nchw) axis = AXIS_TO_NCHW[axis];
  const y = g.node(
    "Concat",
    xs.map((v) => v.name),
    { axis },
  );
  g.setOut(op, g.activation(y, o.activation), nchw);
};

const mean: Translate = (g, op, o) => {
  const x = g.valueAt(op.inputs[0]);
  const axes = g.intConst(op.inputs[1], "MEAN axes").map((a) => (a < 0 ? a + x.shape.length : a));
  const keep = Boolean(o.keepDims);
  let onnxAxes = axes;
  if (x.nchw) {
    onnxAxes = axes.map((a) => AXIS_TO_NCHW[a]);
    if (!keep) {
      // The kept axes must come out in TFLite's order.
      const kept = [0, 1, 2, 3].filter((a) => !axes.includes(a)).map((a) => AXIS_TO_NCHW[a]);
      if (kept.some((a, i) => i > 0 && a < kept[i - 1])) throw new ConversionError(`MEAN over ${axes} without keep_dims is not supported`);
    }
  }
  const y = g.node("ReduceMean", [x.name], { axes: onnxAxes, keepdims: keep ? 1 : 0 });
  g.setOut(op, y, x.nchw && keep);
};

const fullyConnected: Translate = (g, op, o, outT) => {
  const x = g.valueAt(op.inputs[0]);
  const w = g.floatConst(op.inputs[1], "FULLY_CONNECTED weights");
  if (w.shape.length !== 2) throw new ConversionError(`FULLY_CONNECTED weights ${w.shape} are not rank 2`);
  const [outN, inN] = w.shape;
  let a = x.name;
  if (x.shape.length !== 2 || x.shape[1] !== inN) a = g.node("Reshape", [g.inTfliteOrder(x), g.addInt64("shape", [-1, inN])]);
  const inputs = [a, g.addFloat("fc_w", w.shape, w.data)];
  if (op.inputs.length > 2 && op.inputs[2] >= 0) {
    const b = g.floatConst(op.inputs[2], "FULLY_CONNECTED bias");
    inputs.push(g.addFloat("fc_b", [outN], b.data));
  }
  let y = g.node("Gemm", inputs, { transB: 1 });
  y = g.activation(y, o.activation);
  if (outT.shape.length !== 2) y = g.node("Reshape", [y, g.addInt64("shape", outT.shape)]);
  g.setOut(op, y, false);
};

/** OPERATORS: the translation of each TFLite operator this converter supports. */
const OPERATORS: Readonly<Record<string, Translate>> = Object.freeze({
  DEQUANTIZE: dequantize,
  CONV_2D: conv,
  DEPTHWISE_CONV_2D: conv,
  MAX_POOL_2D: pool,
  AVERAGE_POOL_2D: pool,
  ADD: arithmetic,
  MUL: arithmetic,
  SUB: arithmetic,
  PRELU: prelu,
  RELU: elementwise,
  RELU6: elementwise,
  LOGISTIC: elementwise,
  TANH: elementwise,
  PAD: pad,
  RESIZE_BILINEAR: resizeBilinear,
  RESHAPE: reshape,
  CONCATENATION: concatenation,
  MEAN: mean,
  FULLY_CONNECTED: fullyConnected,
});

/** convertTfliteToOnnx translates `model` operator by operator ({@link OPERATORS}) and encodes the ONNX model. */
export function convertTfliteToOnnx(model: TfliteModel, options: ConvertOptions = {}): Uint8Array {
  const g = new Graph(model);
  const { tensors } = model;
  // The graph input: NCHW.
  if (model.inputs.length !== 1) throw new ConversionError(`expected one input, found ${model.inputs.length}`);
  const inTensor = tensors[model.inputs[0]];
  if (inTensor.shape.length !== 4 || inTensor.type !== "FLOAT32") {
    throw new ConversionError(`expected a float32 NHWC image input, found ${inTensor.type}[${inTensor.shape}]`);
  }
  const inputName = options.inputName ?? "input";
  g.values.set(inTensor.index, { name: inputName, nchw: true, shape: inTensor.shape });
  const [, inH, inW, inC] = inTensor.shape;

  for (const op of model.operators) {
    const translate = Object.hasOwn(OPERATORS, op.op) ? OPERATORS[op.op] : undefined;
    if (!translate) throw new ConversionError(`TFLite operator ${op.op} is not supported`);
    translate(g, op, op.options as OpOptions, tensors[op.outputs[0]]);
  }

  const outputNames = options.outputNames ?? model.outputs.map((i) => tensors[i].name);
  if (outputNames.length !== model.outputs.length) {
    throw new ConversionError(`${outputNames.length} output names for ${model.outputs.length} outputs`);
  }
  const outputs = model.outputs.map((i, k) => {
    // Outputs come back in TFLite's own layout.
    g.node("Identity", [g.inTfliteOrder(g.valueAt(i))], undefined, outputNames[k]);
    return { name: outputNames[k], dims: tensors[i].shape };
  });

  const graph: OnnxGraph = {
    name: options.graphName ?? "converted",
    nodes: g.nodes,
    initializers: g.initializers,
    inputs: [{ name: inputName, dims: [1, inC, inH, inW] }],
    outputs,
    opsetVersion: 13,
    metadata: options.metadata,
  };
  return encodeOnnxModel(graph);
}
