/**
 * ONNX writer: a minimal protobuf encoder for the subset of ONNX's `ModelProto` that a converted
 * feed-forward graph needs (nodes with int/float/string/ints attributes, float32/int64
 * initializers as raw data, typed inputs and outputs, metadata properties). Field numbers follow
 * `onnx.proto` (IR version 8).
 */

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

/** PbWriter accumulates protobuf fields as byte chunks. */
class PbWriter {
  private chunks: Uint8Array[] = [];
  private scratch: number[] = [];
  length = 0;

  private flush(): void {
    if (this.scratch.length === 0) return;
    this.chunks.push(Uint8Array.from(this.scratch));
    this.scratch = [];
  }

  private varint(v: number | bigint): void {
    let n = BigInt.asUintN(64, BigInt(v));
    do {
      let b = Number(n & 0x7fn);
      n >>= 7n;
      if (n !== 0n) b |= 0x80;
      this.scratch.push(b);
      this.length++;
    } while (n !== 0n);
  }

  private tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  int(field: number, v: number | bigint): this {
    this.tag(field, 0);
    this.varint(v);
    return this;
  }

  float(field: number, v: number): this {
    this.tag(field, 5);
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, v, true);
    for (const x of b) this.scratch.push(x);
    this.length += 4;
    return this;
  }

  bytes(field: number, data: Uint8Array): this {
    this.tag(field, 2);
    this.varint(data.length);
    this.flush();
    this.chunks.push(data);
    this.length += data.length;
    return this;
  }

  string(field: number, s: string): this {
    return this.bytes(field, new TextEncoder().encode(s));
  }

  message(field: number, w: PbWriter): this {
    return this.bytes(field, w.finish());
  }

  packedInts(field: number, values: readonly number[]): this {
    const inner = new PbWriter();
    for (const v of values) inner.varint(v);
    return this.message(field, inner);
  }

  finish(): Uint8Array {
    this.flush();
    if (this.chunks.length === 1) return this.chunks[0];
    const out = new Uint8Array(this.length);
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }
}

function encodeAttribute(name: string, value: OnnxAttributeValue): PbWriter {
  const w = new PbWriter().string(1, name);
  if (typeof value === "number") {
    if (!Number.isInteger(value)) throw new Error(`attribute ${name}: ${value} is not an integer; pass { float: x }`);
    w.int(3, value).int(20, ATTR_INT);
  } else if (typeof value === "string") {
    w.string(4, value).int(20, ATTR_STRING);
  } else if (Array.isArray(value)) {
    w.packedInts(8, value).int(20, ATTR_INTS);
  } else {
    w.float(2, value.float).int(20, ATTR_FLOAT);
  }
  return w;
}

function encodeNode(node: OnnxNode): PbWriter {
  const w = new PbWriter();
  for (const i of node.inputs) w.string(1, i);
  for (const o of node.outputs) w.string(2, o);
  if (node.name) w.string(3, node.name);
  w.string(4, node.opType);
  for (const [k, v] of Object.entries(node.attributes ?? {})) w.message(5, encodeAttribute(k, v));
  return w;
}

function encodeInitializer(t: OnnxInitializer): PbWriter {
  const w = new PbWriter();
  for (const d of t.dims) w.int(1, d);
  w.int(2, t.data instanceof Float32Array ? ONNX_FLOAT : ONNX_INT64);
  w.string(8, t.name);
  // raw_data is little-endian; typed arrays are host-endian, which is little-endian on every
  // platform Node supports in practice. Checked once here rather than assumed silently.
  if (new Uint8Array(new Uint16Array([1]).buffer)[0] !== 1) throw new Error("big-endian hosts are not supported");
  w.bytes(9, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
  return w;
}

function encodeValueInfo(v: OnnxValueInfo): PbWriter {
  const shape = new PbWriter();
  for (const d of v.dims) shape.message(1, new PbWriter().int(1, d));
  const tensorType = new PbWriter().int(1, ONNX_FLOAT).message(2, shape);
  const type = new PbWriter().message(1, tensorType);
  return new PbWriter().string(1, v.name).message(2, type);
}

/** encodeOnnxModel serialises `graph` as an ONNX `ModelProto` (IR version 8, default domain opset). */
export function encodeOnnxModel(graph: OnnxGraph): Uint8Array {
  const g = new PbWriter();
  for (const n of graph.nodes) g.message(1, encodeNode(n));
  g.string(2, graph.name);
  for (const t of graph.initializers) g.message(5, encodeInitializer(t));
  for (const v of graph.inputs) g.message(11, encodeValueInfo(v));
  for (const v of graph.outputs) g.message(12, encodeValueInfo(v));

  const m = new PbWriter().int(1, 8);
  m.string(2, graph.producerName ?? "palm-line-api");
  m.message(8, new PbWriter().string(1, "").int(2, graph.opsetVersion));
  if (graph.docString) m.string(6, graph.docString);
  m.message(7, g);
  for (const [key, value] of Object.entries(graph.metadata ?? {})) {
    m.message(14, new PbWriter().string(1, key).string(2, value));
  }
  return m.finish();
}
