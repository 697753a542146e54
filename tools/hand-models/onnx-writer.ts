/**
 * ONNX writer: protobuf-es's BinaryWriter over the subset of ONNX's `ModelProto` that a converted
 * feed-forward graph needs (nodes with int/float/string/ints attributes, float32/int64
 * initializers as raw data, typed inputs and outputs, metadata properties). Field numbers follow
 * `onnx.proto` (IR version 8).
 */
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";

/** OnnxAttribute is one node attribute: a number is an int unless listed in `floats` of the node. */
export type OnnxAttributeValue = number | string | number[] | { float: number };

/** OnnxNode is one graph node. */
export interface OnnxNode {
  opType: string;
  /** Input value names; "" for an omitted optional input. */
  inputs: string[];
  outputs: string[];
  name?: string;
  attributes?: Record<string, OnnxAttributeValue>;
}

/** OnnxInitializer is a constant tensor: float32 or int64 data. */
export interface OnnxInitializer {
  name: string;
  dims: number[];
  data: Float32Array | BigInt64Array;
}

/** OnnxValueInfo is a typed graph input or output (float32 tensors only). */
export interface OnnxValueInfo {
  name: string;
  dims: number[];
}

/** OnnxGraph is what {@link encodeOnnxModel} writes. */
export interface OnnxGraph {
  name: string;
  nodes: OnnxNode[];
  initializers: OnnxInitializer[];
  inputs: OnnxValueInfo[];
  outputs: OnnxValueInfo[];
  opsetVersion: number;
  producerName?: string;
  docString?: string;
  metadata?: Record<string, string>;
}

const ONNX_FLOAT = 1;
const ONNX_INT64 = 7;
const ATTR_FLOAT = 1;
const ATTR_INT = 2;
const ATTR_STRING = 3;
const ATTR_INTS = 7;

/** Field writers over protobuf-es's BinaryWriter, one line per protobuf wire type used. */
const int = (w: BinaryWriter, field: number, v: number) => w.tag(field, WireType.Varint).int64(v);
const float = (w: BinaryWriter, field: number, v: number) => w.tag(field, WireType.Bit32).float(v);
const bytes = (w: BinaryWriter, field: number, data: Uint8Array) => w.tag(field, WireType.LengthDelimited).bytes(data);
const string = (w: BinaryWriter, field: number, s: string) => w.tag(field, WireType.LengthDelimited).string(s);
/** message writes `write`'s fields as the embedded message `field`. */
const message = (w: BinaryWriter, field: number, write: (inner: BinaryWriter) => void) => {
  w.tag(field, WireType.LengthDelimited).fork();
  write(w);
  return w.join();
};

/** AttributeProto: name 1, f 2, i 3, s 4, ints 8 (packed), type 20. */
function writeAttribute(w: BinaryWriter, name: string, value: OnnxAttributeValue): void {
  string(w, 1, name);
  if (typeof value === "number") {
    if (!Number.isInteger(value)) throw new Error(`attribute ${name}: ${value} is not an integer; pass { float: x }`);
    int(int(w, 3, value), 20, ATTR_INT);
  } else if (typeof value === "string") {
    int(string(w, 4, value), 20, ATTR_STRING);
  } else if (Array.isArray(value)) {
    message(w, 8, (inner) => {
      for (const v of value) inner.int64(v);
    });
    int(w, 20, ATTR_INTS);
  } else {
    int(float(w, 2, value.float), 20, ATTR_FLOAT);
  }
}

/** NodeProto: input 1, output 2, name 3, op_type 4, attribute 5. */
function writeNode(w: BinaryWriter, node: OnnxNode): void {
  for (const i of node.inputs) string(w, 1, i);
  for (const o of node.outputs) string(w, 2, o);
  if (node.name) string(w, 3, node.name);
  string(w, 4, node.opType);
  for (const [k, v] of Object.entries(node.attributes ?? {})) message(w, 5, (a) => writeAttribute(a, k, v));
}

/** TensorProto: dims 1, data_type 2, name 8, raw_data 9. */
function writeInitializer(w: BinaryWriter, t: OnnxInitializer): void {
  for (const d of t.dims) int(w, 1, d);
  int(w, 2, t.data instanceof Float32Array ? ONNX_FLOAT : ONNX_INT64);
  string(w, 8, t.name);
  // raw_data is little-endian; typed arrays are host-endian, which is little-endian on every
  // platform Node supports in practice. Checked once here rather than assumed silently.
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error("big-endian hosts are not supported");
  bytes(w, 9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
}

/** ValueInfoProto: name 1, type 2 (TypeProto.tensor_type 1: elem_type 1, shape 2 of dims 1 with dim_value 1). */
function writeValueInfo(w: BinaryWriter, v: OnnxValueInfo): void {
  string(w, 1, v.name);
  message(w, 2, (type) =>
    message(type, 1, (tensorType) => {
      int(tensorType, 1, ONNX_FLOAT);
      message(tensorType, 2, (shape) => {
        for (const d of v.dims) message(shape, 1, (dim) => int(dim, 1, d));
      });
    }),
  );
}

/** encodeOnnxModel serialises `graph` as an ONNX `ModelProto` (IR version 8, default domain opset). */
export function encodeOnnxModel(graph: OnnxGraph): Uint8Array {
  const m = new BinaryWriter();
  int(m, 1, 8); // ir_version
  string(m, 2, graph.producerName ?? "palm-line-api");
  message(m, 8, (opset) => int(string(opset, 1, ""), 2, graph.opsetVersion));
  if (graph.docString) string(m, 6, graph.docString);
  message(m, 7, (g) => {
    for (const n of graph.nodes) message(g, 1, (w) => writeNode(w, n));
    string(g, 2, graph.name);
    for (const t of graph.initializers) message(g, 5, (w) => writeInitializer(w, t));
    for (const v of graph.inputs) message(g, 11, (w) => writeValueInfo(w, v));
    for (const v of graph.outputs) message(g, 12, (w) => writeValueInfo(w, v));
  });
  for (const [key, value] of Object.entries(graph.metadata ?? {})) message(m, 14, (p) => string(string(p, 1, key), 2, value));
  return m.finish();
}
