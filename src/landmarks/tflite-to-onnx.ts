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
export function convertTfliteToOnnx(model: TfliteModel, options: ConvertOptions = {}): Uint8Array {
  const { tensors } = model;
  const nodes: OnnxNode[] = [];
  const initializers: OnnxInitializer[] = [];
  const consts = new Map<number, Const>();
  const values = new Map<number, Value>();
  let uid = 0;
  const fresh = (base: string) => `${base}_${uid++}`;

  const constOf = (t: TfliteTensor): Const | undefined => {
    const known = consts.get(t.index);
    if (known) return known;
    const raw = model.buffers[t.buffer];
    if (!raw || raw.length === 0) return undefined;
    let c: Const;
    if (t.type === "FLOAT32") c = { shape: t.shape, data: new Float32Array(new Uint8Array(raw).buffer) };
    else if (t.type === "FLOAT16") c = { shape: t.shape, data: halfToFloat32(raw) };
    else if (t.type === "INT32") c = { shape: t.shape, ints: new Int32Array(new Uint8Array(raw).buffer) };
    else throw new ConversionError(`constant tensor ${t.name} has unsupported type ${t.type}`);
    consts.set(t.index, c);
    return c;
  };
  const floatConst = (i: number, what: string): { shape: number[]; data: Float32Array } => {
    const c = constOf(tensors[i]);
    if (!c || !("data" in c)) throw new ConversionError(`${what} (${tensors[i].name}) must be a float constant`);
    return c;
  };
  const intConst = (i: number, what: string): number[] => {
    const c = constOf(tensors[i]);
    if (!c || !("ints" in c)) throw new ConversionError(`${what} (${tensors[i].name}) must be an int32 constant`);
    return Array.from(c.ints);
  };
  const addFloat = (base: string, dims: number[], data: Float32Array): string => {
    const name = fresh(base);
    initializers.push({ name, dims, data });
    return name;
  };
  const addInt64 = (base: string, values: readonly number[]): string => {
    const name = fresh(base);
    initializers.push({ name, dims: [values.length], data: BigInt64Array.from(values.map((v) => BigInt(v))) });
    return name;
  };
  const node = (opType: string, inputs: string[], attributes?: Record<string, OnnxAttributeValue>, out?: string): string => {
    const output = out ?? fresh(opType.toLowerCase());
    nodes.push({ opType, inputs, outputs: [output], name: output, attributes });
    return output;
  };
  const valueAt = (i: number): Value => {
    const v = values.get(i);
    if (v) return v;
    const c = constOf(tensors[i]);
    if (c && "data" in c) {
      // A float constant used as an activation operand (e.g. a broadcast ADD term).
      const rank4 = c.shape.length === 4;
      const t = rank4 ? permute4(c.data, c.shape, TO_NCHW) : { data: c.data, shape: c.shape };
      const cv = { name: addFloat(`const${i}`, t.shape, t.data), nchw: rank4, shape: c.shape };
      values.set(i, cv);
      return cv;
    }
    throw new ConversionError(`tensor ${tensors[i].name} is read before it is produced`);
  };
  const setOut = (op: TfliteOperator, name: string, nchw: boolean) => {
    const t = tensors[op.outputs[0]];
    values.set(t.index, { name, nchw: nchw && t.shape.length === 4, shape: t.shape });
  };
  const activation = (name: string, code: number): string => {
    switch (code) {
      case 0:
        return name;
      case 1:
        return node("Relu", [name]);
      case 2:
        return node("Clip", [name, addFloat("min", [], Float32Array.of(-1)), addFloat("max", [], Float32Array.of(1))]);
      case 3:
        return node("Clip", [name, addFloat("min", [], Float32Array.of(0)), addFloat("max", [], Float32Array.of(6))]);
      case 4:
        return node("Tanh", [name]);
      default:
        throw new ConversionError(`fused activation ${code} is not supported`);
    }
  };
  /** asNhwcFlat gives the value in TFLite's own memory order (undoing NCHW for rank 4). */
  const inTfliteOrder = (v: Value): string => (v.nchw ? node("Transpose", [v.name], { perm: TO_NHWC }) : v.name);

  // The graph input: NCHW.
  if (model.inputs.length !== 1) throw new ConversionError(`expected one input, found ${model.inputs.length}`);
  const inTensor = tensors[model.inputs[0]];
  if (inTensor.shape.length !== 4 || inTensor.type !== "FLOAT32") {
    throw new ConversionError(`expected a float32 NHWC image input, found ${inTensor.type}[${inTensor.shape}]`);
  }
  const inputName = options.inputName ?? "input";
  values.set(inTensor.index, { name: inputName, nchw: true, shape: inTensor.shape });
  const [, inH, inW, inC] = inTensor.shape;

  for (const op of model.operators) {
    const o = op.options as Record<string, number & boolean & number[]>;
    const outT = tensors[op.outputs[0]];
    switch (op.op) {
      case "DEQUANTIZE": {
        const src = tensors[op.inputs[0]];
        const c = constOf(src);
        if (!c || !("data" in c)) throw new ConversionError(`DEQUANTIZE of non-constant ${src.name} is not supported`);
        consts.set(outT.index, { shape: outT.shape, data: c.data });
        break;
      }
      case "CONV_2D":
      case "DEPTHWISE_CONV_2D": {
        const x = valueAt(op.inputs[0]);
        if (!x.nchw) throw new ConversionError(`${op.op} input ${tensors[op.inputs[0]].name} is not rank 4`);
        const w = floatConst(op.inputs[1], `${op.op} filter`);
        const [, kh, kw] = w.shape;
        const depthwise = op.op === "DEPTHWISE_CONV_2D";
        // CONV_2D filter [O, KH, KW, I] -> [O, I, KH, KW]; depthwise [1, KH, KW, C*M] -> [C*M, 1, KH, KW].
        const wt = permute4(w.data, w.shape, depthwise ? [3, 0, 1, 2] : TO_NCHW);
        const inputs = [x.name, addFloat("w", wt.shape, wt.data)];
        if (op.inputs.length > 2 && op.inputs[2] >= 0) {
          const b = floatConst(op.inputs[2], `${op.op} bias`);
          inputs.push(addFloat("b", [b.data.length], b.data));
        }
        const [, ih, iw, ic] = x.shape;
        const [, oh, ow] = outT.shape;
        const dh = o.dilationH || 1;
        const dw = o.dilationW || 1;
        const [pt, pb] = o.padding === 0 ? samePads(ih, oh, kh, o.strideH, dh) : [0, 0];
        const [pl, pr] = o.padding === 0 ? samePads(iw, ow, kw, o.strideW, dw) : [0, 0];
        const y = node("Conv", inputs, {
          kernel_shape: [kh, kw],
          strides: [o.strideH, o.strideW],
          dilations: [dh, dw],
          pads: [pt, pl, pb, pr],
          group: depthwise ? ic : 1,
        });
        setOut(op, activation(y, o.activation), true);
        break;
      }
      case "MAX_POOL_2D":
      case "AVERAGE_POOL_2D": {
        const x = valueAt(op.inputs[0]);
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
        const y = node(op.op === "MAX_POOL_2D" ? "MaxPool" : "AveragePool", [x.name], attrs);
        setOut(op, activation(y, o.activation), true);
        break;
      }
      case "ADD":
      case "MUL":
      case "SUB": {
        const a = valueAt(op.inputs[0]);
        const b = valueAt(op.inputs[1]);
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
          return node("Reshape", [v.name, addInt64("shape", [-1, 1, 1])]);
        };
        const onnxOp = op.op === "ADD" ? "Add" : op.op === "MUL" ? "Mul" : "Sub";
        setOut(op, activation(node(onnxOp, [fix(a), fix(b)]), o.activation), rank4);
        break;
      }
      case "PRELU": {
        const x = valueAt(op.inputs[0]);
        const alpha = floatConst(op.inputs[1], "PRELU alpha");
        let slope: string;
        if (!x.nchw) slope = addFloat("alpha", alpha.shape, alpha.data);
        else if (alpha.shape.length === 4) {
          const t = permute4(alpha.data, alpha.shape, TO_NCHW);
          slope = addFloat("alpha", t.shape, t.data);
        } else {
          const c = alpha.shape[alpha.shape.length - 1];
          if (product(alpha.shape) !== c) throw new ConversionError(`PRELU alpha ${alpha.shape} is not per-channel`);
          slope = addFloat("alpha", [c, 1, 1], alpha.data);
        }
        setOut(op, node("PRelu", [x.name, slope]), x.nchw);
        break;
      }
      case "RELU":
      case "RELU6":
      case "LOGISTIC":
      case "TANH": {
        const x = valueAt(op.inputs[0]);
        const code = { RELU: 1, RELU6: 3 }[op.op as "RELU" | "RELU6"];
        const y = code ? activation(x.name, code) : node(op.op === "LOGISTIC" ? "Sigmoid" : "Tanh", [x.name]);
        setOut(op, y, x.nchw);
        break;
      }
      case "PAD": {
        const x = valueAt(op.inputs[0]);
        const p = intConst(op.inputs[1], "PAD paddings");
        const rank = x.shape.length;
        const begin = new Array<number>(rank).fill(0);
        const end = new Array<number>(rank).fill(0);
        for (let ax = 0; ax < rank; ax++) {
          const to = x.nchw ? AXIS_TO_NCHW[ax] : ax;
          begin[to] = p[2 * ax];
          end[to] = p[2 * ax + 1];
        }
        setOut(op, node("Pad", [x.name, addInt64("pads", [...begin, ...end])], { mode: "constant" }), x.nchw);
        break;
      }
      case "RESIZE_BILINEAR": {
        const x = valueAt(op.inputs[0]);
        const [, oh, ow, oc] = outT.shape;
        const mode = o.alignCorners ? "align_corners" : o.halfPixelCenters ? "half_pixel" : "asymmetric";
        const y = node("Resize", [x.name, "", "", addInt64("sizes", [1, oc, oh, ow])], {
          mode: "linear",
          coordinate_transformation_mode: mode,
        });
        setOut(op, y, true);
        break;
      }
      case "RESHAPE": {
        const x = valueAt(op.inputs[0]);
        let y = node("Reshape", [inTfliteOrder(x), addInt64("shape", outT.shape)]);
        if (outT.shape.length === 4) y = node("Transpose", [y], { perm: TO_NCHW });
        setOut(op, y, true);
        break;
      }
      case "CONCATENATION": {
        const xs = op.inputs.map(valueAt);
        const rank = outT.shape.length;
        let axis = o.axis < 0 ? o.axis + rank : o.axis;
        const nchw = rank === 4;
        if (nchw && !xs.every((v) => v.nchw)) throw new ConversionError("CONCATENATION mixes layouts");
        if (nchw) axis = AXIS_TO_NCHW[axis];
        setOut(
          op,
          activation(
            node(
              "Concat",
              xs.map((v) => v.name),
              { axis },
            ),
            o.activation,
          ),
          nchw,
        );
        break;
      }
      case "MEAN": {
        const x = valueAt(op.inputs[0]);
        const axes = intConst(op.inputs[1], "MEAN axes").map((a) => (a < 0 ? a + x.shape.length : a));
        const keep = Boolean(o.keepDims);
        let onnxAxes = axes;
        if (x.nchw) {
          onnxAxes = axes.map((a) => AXIS_TO_NCHW[a]);
          if (!keep) {
            // The kept axes must come out in TFLite's order.
            const kept = [0, 1, 2, 3].filter((a) => !axes.includes(a)).map((a) => AXIS_TO_NCHW[a]);
            if (kept.some((a, i) => i > 0 && a < kept[i - 1]))
              throw new ConversionError(`MEAN over ${axes} without keep_dims is not supported`);
          }
        }
        const y = node("ReduceMean", [x.name], { axes: onnxAxes, keepdims: keep ? 1 : 0 });
        setOut(op, y, x.nchw && keep);
        break;
      }
      case "FULLY_CONNECTED": {
        const x = valueAt(op.inputs[0]);
        const w = floatConst(op.inputs[1], "FULLY_CONNECTED weights");
        if (w.shape.length !== 2) throw new ConversionError(`FULLY_CONNECTED weights ${w.shape} are not rank 2`);
        const [outN, inN] = w.shape;
        let a = x.name;
        if (x.shape.length !== 2 || x.shape[1] !== inN) a = node("Reshape", [inTfliteOrder(x), addInt64("shape", [-1, inN])]);
        const inputs = [a, addFloat("fc_w", w.shape, w.data)];
        if (op.inputs.length > 2 && op.inputs[2] >= 0) {
          const b = floatConst(op.inputs[2], "FULLY_CONNECTED bias");
          inputs.push(addFloat("fc_b", [outN], b.data));
        }
        let y = node("Gemm", inputs, { transB: 1 });
        y = activation(y, o.activation);
        if (outT.shape.length !== 2) y = node("Reshape", [y, addInt64("shape", outT.shape)]);
        setOut(op, y, false);
        break;
      }
      default:
        throw new ConversionError(`TFLite operator ${op.op} is not supported`);
    }
  }

  const outputNames = options.outputNames ?? model.outputs.map((i) => tensors[i].name);
  if (outputNames.length !== model.outputs.length) {
    throw new ConversionError(`${outputNames.length} output names for ${model.outputs.length} outputs`);
  }
  const outputs = model.outputs.map((i, k) => {
    const v = valueAt(i);
    // Outputs come back in TFLite's own layout.
    node("Identity", [inTfliteOrder(v)], undefined, outputNames[k]);
    return { name: outputNames[k], dims: tensors[i].shape };
  });

  const graph: OnnxGraph = {
    name: options.graphName ?? "converted",
    nodes,
    initializers,
    inputs: [{ name: inputName, dims: [1, inC, inH, inW] }],
    outputs,
    opsetVersion: 13,
    metadata: options.metadata,
  };
  return encodeOnnxModel(graph);
}
