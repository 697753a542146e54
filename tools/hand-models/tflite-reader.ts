/**
 * TFLite reader: a minimal flatbuffer reader for the part of TensorFlow Lite's `schema.fbs` that
 * the MediaPipe hand models use (model, subgraph, tensors, operators, buffers and the builtin
 * options of the operators we translate). Read-only, no dependencies, no code generation.
 */

/** TfliteError is thrown for a file that is not a TFLite flatbuffer, or a part of one we cannot read. */
export class TfliteError extends Error {
  override name = "TfliteError";
}

/** TENSOR_TYPES names TFLite's `TensorType` enum values that we meet. */
export const TENSOR_TYPES: Readonly<Record<number, string>> = Object.freeze({
  0: "FLOAT32",
  1: "FLOAT16",
  2: "INT32",
  3: "UINT8",
  4: "INT64",
  6: "BOOL",
  7: "INT16",
  9: "INT8",
});

/** BUILTIN_OPERATORS names TFLite's `BuiltinOperator` enum values (the first 60; enough here). */
export const BUILTIN_OPERATORS: readonly string[] = Object.freeze([
  "ADD",
  "AVERAGE_POOL_2D",
  "CONCATENATION",
  "CONV_2D",
  "DEPTHWISE_CONV_2D",
  "DEPTH_TO_SPACE",
  "DEQUANTIZE",
  "EMBEDDING_LOOKUP",
  "FLOOR",
  "FULLY_CONNECTED",
  "HASHTABLE_LOOKUP",
  "L2_NORMALIZATION",
  "L2_POOL_2D",
  "LOCAL_RESPONSE_NORMALIZATION",
  "LOGISTIC",
  "LSH_PROJECTION",
  "LSTM",
  "MAX_POOL_2D",
  "MUL",
  "RELU",
  "RELU_N1_TO_1",
  "RELU6",
  "RESHAPE",
  "RESIZE_BILINEAR",
  "RNN",
  "SOFTMAX",
  "SPACE_TO_DEPTH",
  "SVDF",
  "TANH",
  "CONCAT_EMBEDDINGS",
  "SKIP_GRAM",
  "CALL",
  "CUSTOM",
  "EMBEDDING_LOOKUP_SPARSE",
  "PAD",
  "UNIDIRECTIONAL_SEQUENCE_RNN",
  "GATHER",
  "BATCH_TO_SPACE_ND",
  "SPACE_TO_BATCH_ND",
  "TRANSPOSE",
  "MEAN",
  "SUB",
  "DIV",
  "SQUEEZE",
  "UNIDIRECTIONAL_SEQUENCE_LSTM",
  "STRIDED_SLICE",
  "BIDIRECTIONAL_SEQUENCE_RNN",
  "EXP",
  "TOPK_V2",
  "SPLIT",
  "LOG_SOFTMAX",
  "DELEGATE",
  "BIDIRECTIONAL_SEQUENCE_LSTM",
  "CAST",
  "PRELU",
  "MAXIMUM",
  "ARG_MAX",
  "MINIMUM",
  "LESS",
  "NEG",
]);

/** TfliteTensor is one tensor of a subgraph. */
export interface TfliteTensor {
  index: number;
  name: string;
  shape: number[];
  /** Name from {@link TENSOR_TYPES}, or `TYPE_<n>`. */
  type: string;
  /** Index into {@link TfliteModel.buffers}; a buffer with data makes the tensor a constant. */
  buffer: number;
}

/** TfliteOperator is one operator of a subgraph, with its builtin options read as plain values. */
export interface TfliteOperator {
  /** Builtin operator name, e.g. `CONV_2D`, or `CUSTOM:<code>`. */
  op: string;
  /** Tensor indices; -1 is an omitted optional input. */
  inputs: number[];
  outputs: number[];
  /** The options of this operator's type that we read (see {@link readOptions}). */
  options: Record<string, number | boolean | number[]>;
}

/** TfliteModel is the first subgraph of a TFLite model plus its buffers. */
export interface TfliteModel {
  version: number;
  description: string;
  tensors: TfliteTensor[];
  inputs: number[];
  outputs: number[];
  operators: TfliteOperator[];
  /** Raw buffer contents (views into the file); empty for non-constant tensors. */
  buffers: Uint8Array[];
}

/** Table is a position in the buffer with its vtable, for reading fields by id. */
class Table {
  constructor(
    private readonly r: FlatReader,
    readonly pos: number,
  ) {}

  private fieldPos(id: number): number {
    const vt = this.pos - this.r.dv.getInt32(this.pos, true);
    const vtSize = this.r.dv.getUint16(vt, true);
    const at = 4 + 2 * id;
    if (at >= vtSize) return 0;
    const off = this.r.dv.getUint16(vt + at, true);
    return off === 0 ? 0 : this.pos + off;
  }

  has(id: number): boolean {
    return this.fieldPos(id) !== 0;
  }

  int32(id: number, dflt = 0): number {
    const p = this.fieldPos(id);
    return p ? this.r.dv.getInt32(p, true) : dflt;
  }

  uint32(id: number, dflt = 0): number {
    const p = this.fieldPos(id);
    return p ? this.r.dv.getUint32(p, true) : dflt;
  }

  int8(id: number, dflt = 0): number {
    const p = this.fieldPos(id);
    return p ? this.r.dv.getInt8(p) : dflt;
  }

  uint8(id: number, dflt = 0): number {
    const p = this.fieldPos(id);
    return p ? this.r.dv.getUint8(p) : dflt;
  }

  bool(id: number, dflt = false): boolean {
    const p = this.fieldPos(id);
    return p ? this.r.dv.getUint8(p) !== 0 : dflt;
  }

  private indirect(id: number): number {
    const p = this.fieldPos(id);
    return p ? p + this.r.dv.getUint32(p, true) : 0;
  }

  table(id: number): Table | undefined {
    const p = this.indirect(id);
    return p ? new Table(this.r, p) : undefined;
  }

  string(id: number): string {
    const p = this.indirect(id);
    if (!p) return "";
    const n = this.r.dv.getUint32(p, true);
    return new TextDecoder().decode(this.r.bytes.subarray(p + 4, p + 4 + n));
  }

  /** Start and length of a vector field; [0, 0] when absent. */
  private vector(id: number): [number, number] {
    const p = this.indirect(id);
    if (!p) return [0, 0];
    return [p + 4, this.r.dv.getUint32(p, true)];
  }

  int32s(id: number): number[] {
    const [start, n] = this.vector(id);
    const out = new Array<number>(n);
    for (let i = 0; i < n; i++) out[i] = this.r.dv.getInt32(start + 4 * i, true);
    return out;
  }

  bytes(id: number): Uint8Array {
    const [start, n] = this.vector(id);
    return this.r.bytes.subarray(start, start + n);
  }

  tables(id: number): Table[] {
    const [start, n] = this.vector(id);
    const out = new Array<Table>(n);
    for (let i = 0; i < n; i++) {
      const p = start + 4 * i;
      out[i] = new Table(this.r, p + this.r.dv.getUint32(p, true));
    }
    return out;
  }
}

class FlatReader {
  readonly dv: DataView;
  constructor(readonly bytes: Uint8Array) {
    this.dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  root(): Table {
    return new Table(this, this.dv.getUint32(0, true));
  }
}

/** isTflite tells whether `bytes` carry the TFLite flatbuffer file identifier `TFL3` at bytes 4-7. */
export function isTflite(bytes: Uint8Array): boolean {
  return bytes.length > 8 && bytes[4] === 0x54 && bytes[5] === 0x46 && bytes[6] === 0x4c && bytes[7] === 0x33;
}

/**
 * readOptions reads the builtin options table of operator `op` into plain fields, following
 * `schema.fbs` (field ids in the order the schema declares them). Operators without options we
 * need give `{}`.
 */
function readOptions(op: string, t: Table | undefined): Record<string, number | boolean | number[]> {
  if (!t) return {};
  switch (op) {
    case "CONV_2D":
      return {
        padding: t.int8(0),
        strideW: t.int32(1),
        strideH: t.int32(2),
        activation: t.int8(3),
        dilationW: t.int32(4, 1),
        dilationH: t.int32(5, 1),
      };
    case "DEPTHWISE_CONV_2D":
      return {
        padding: t.int8(0),
        strideW: t.int32(1),
        strideH: t.int32(2),
        depthMultiplier: t.int32(3),
        activation: t.int8(4),
        dilationW: t.int32(5, 1),
        dilationH: t.int32(6, 1),
      };
    case "AVERAGE_POOL_2D":
    case "MAX_POOL_2D":
      return {
        padding: t.int8(0),
        strideW: t.int32(1),
        strideH: t.int32(2),
        filterW: t.int32(3),
        filterH: t.int32(4),
        activation: t.int8(5),
      };
    case "FULLY_CONNECTED":
      return { activation: t.int8(0), weightsFormat: t.int8(1), keepNumDims: t.bool(2) };
    case "CONCATENATION":
      return { axis: t.int32(0), activation: t.int8(1) };
    case "ADD":
    case "MUL":
    case "SUB":
      return { activation: t.int8(0) };
    case "RESIZE_BILINEAR":
      return { alignCorners: t.bool(2), halfPixelCenters: t.bool(3) };
    case "RESHAPE":
      return { newShape: t.int32s(0) };
    case "MEAN":
      return { keepDims: t.bool(0) };
    default:
      return {};
  }
}

/**
 * readTflite parses a TFLite flatbuffer (`TFL3`) into {@link TfliteModel}: the first subgraph's
 * tensors, operators (with the builtin options we translate) and inputs/outputs, and the model's
 * buffers as views into `bytes` (no copy). Throws {@link TfliteError}.
 */
export function readTflite(bytes: Uint8Array): TfliteModel {
  if (!isTflite(bytes)) throw new TfliteError("not a TFLite flatbuffer (no TFL3 identifier)");
  try {
    const model = new FlatReader(bytes).root();
    const opcodes = model.tables(1).map((oc) => {
      // builtin_code (id 3, int32) supersedes deprecated_builtin_code (id 0, int8) since schema v3a.
      const code = Math.max(oc.int8(0), oc.int32(3));
      if (code === 32) return `CUSTOM:${oc.string(1)}`;
      return BUILTIN_OPERATORS[code] ?? `BUILTIN_${code}`;
    });
    const subgraphs = model.tables(2);
    if (subgraphs.length === 0) throw new TfliteError("the model has no subgraph");
    const sg = subgraphs[0];
    const tensors = sg.tables(0).map((t, index) => {
      const type = t.int8(1);
      return { index, name: t.string(3), shape: t.int32s(0), type: TENSOR_TYPES[type] ?? `TYPE_${type}`, buffer: t.uint32(2) };
    });
    const operators = sg.tables(3).map((o) => {
      const op = opcodes[o.uint32(0)];
      if (op === undefined) throw new TfliteError(`operator code index ${o.uint32(0)} out of range`);
      return { op, inputs: o.int32s(1), outputs: o.int32s(2), options: readOptions(op, o.table(4)) };
    });
    const buffers = model.tables(4).map((b) => {
      if (b.has(1) && b.has(2)) throw new TfliteError("buffers stored outside the flatbuffer (offset/size) are not supported");
      return b.bytes(0);
    });
    return {
      version: model.uint32(0),
      description: model.string(3),
      tensors,
      inputs: sg.int32s(1),
      outputs: sg.int32s(2),
      operators,
      buffers,
    };
  } catch (cause) {
    if (cause instanceof TfliteError) throw cause;
    throw new TfliteError(`malformed TFLite flatbuffer: ${(cause as Error).message}`, { cause });
  }
}
