/**
 * Generic JSON ↔ protobuf for the REST surface, driven by message descriptors:
 * - requests: proto3 JSON with unknown fields ignored, and every `bytes` field decoded with the
 *   lenient base64 of SPEC.md section 2 (invalid → 400 invalid_base64; not a string → invalid_json);
 * - responses: proto field names (snake_case), implicit defaults emitted, and 64-bit integers
 *   as JSON numbers rather than proto3's strings (SPEC.md section 3).
 */
import {
  fromJson,
  toJson,
  ScalarType,
  type DescField,
  type DescMessage,
  type JsonObject,
  type JsonValue,
  type MessageShape,
} from "@bufbuild/protobuf";
import { badRequest, palmError } from "../errors.js";
import { decodeBase64Lenient } from "./base64.js";

const INT64_TYPES = new Set([ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64]);

/** isJsonObject tells a plain JSON object from arrays, null and scalars. */
export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * decodeRestBody turns a REST body (UTF-8 JSON bytes) into the request message. `bodyField` is
 * the route's `body` ("*": the whole message). Throws ConnectErrors invalid_json / invalid_base64.
 */
export function decodeRestBody<Desc extends DescMessage>(desc: Desc, bodyField: string, bytes: Uint8Array): MessageShape<Desc> {
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw palmError("invalid_json", { message: "The request body is not valid JSON." });
  }
  if (!isJsonObject(json)) throw palmError("invalid_json");
  return requestFromJson(desc, bodyField === "*" ? json : { [bodyField]: json });
}

/** encodeRestBody writes a response message as the UTF-8 bytes of its SPEC.md JSON. */
export function encodeRestBody<Desc extends DescMessage>(desc: Desc, msg: MessageShape<Desc>): Buffer {
  return Buffer.from(JSON.stringify(responseToJson(desc, msg)));
}

/**
 * requestFromJson builds a request message from a parsed JSON object. Throws ConnectErrors
 * with reason invalid_json or invalid_base64 (with a BadRequest field violation).
 */
export function requestFromJson<Desc extends DescMessage>(desc: Desc, json: JsonObject): MessageShape<Desc> {
  const setters: ((msg: Record<string, unknown>) => void)[] = [];
  extractBytes(desc, json, [], setters);
  let msg: MessageShape<Desc>;
  try {
    msg = fromJson(desc, json, { ignoreUnknownFields: true });
  } catch (e) {
    throw badRequest("invalid_json", "", `The request body does not match ${desc.typeName}.`, e);
  }
  for (const set of setters) set(msg as unknown as Record<string, unknown>);
  return msg;
}

/**
 * extractBytes replaces every singular bytes field (at any depth of singular messages) by null
 * in `json` and records a setter that puts the leniently decoded bytes into the built message.
 */
function extractBytes(desc: DescMessage, json: JsonObject, path: DescField[], setters: ((m: Record<string, unknown>) => void)[]): void {
  for (const field of desc.fields) {
    const key = field.jsonName in json ? field.jsonName : field.name in json ? field.name : undefined;
    if (key === undefined) continue;
    const value = json[key];
    if (value === null) continue;
    if (field.fieldKind === "scalar" && field.scalar === ScalarType.BYTES) {
      const where = [...path, field].map((f) => f.name).join(".");
      if (typeof value !== "string") {
        throw badRequest("invalid_json", where, `Field ${where} must be a base64 string.`);
      }
      const bytes = decodeBase64Lenient(value);
      if (bytes === undefined) throw badRequest("invalid_base64", where, `Field ${where} is not valid base64.`);
      json[key] = null;
      const chain = [...path, field];
      setters.push((msg) => {
        let target = msg;
        for (const f of chain.slice(0, -1)) target = target[f.localName] as Record<string, unknown>;
        target[field.localName] = bytes;
      });
    } else if (field.fieldKind === "message" && isJsonObject(value) && !field.message.typeName.startsWith("google.protobuf.")) {
      extractBytes(field.message, value, [...path, field], setters);
    }
  }
}

/** responseToJson writes a response message as SPEC.md JSON (snake_case, numbers, defaults). */
export function responseToJson<Desc extends DescMessage>(desc: Desc, msg: MessageShape<Desc>): JsonValue {
  // protobuf-es base64-encodes bytes one character at a time on Node 20 (no
  // Uint8Array.prototype.toBase64; docs/decisions/rest-base64-with-buffer.md).
  // Singular bytes fields are taken out, encoded with Buffer, and put back.
  const taken: TakenBytes[] = [];
  takeBytes(desc, msg as unknown as Record<string, unknown>, [], taken);
  let json: JsonValue;
  try {
    json = toJson(desc, msg, { useProtoFieldName: true, alwaysEmitImplicit: true });
  } finally {
    for (const t of taken) t.holder[t.localName] = t.value;
  }
  for (const t of taken) {
    let target = json as JsonObject;
    for (const name of t.path.slice(0, -1)) target = target[name] as JsonObject;
    target[t.path[t.path.length - 1]] = Buffer.from(t.value.buffer, t.value.byteOffset, t.value.byteLength).toString("base64");
  }
  if (isJsonObject(json)) int64AsNumbers(desc, json);
  return json;
}

interface TakenBytes {
  holder: Record<string, unknown>;
  localName: string;
  value: Uint8Array;
  /** Proto field names from the root to the field. */
  path: string[];
}

/** takeBytes replaces every non-empty singular bytes field (at any depth of singular messages) by an empty array. */
function takeBytes(desc: DescMessage, msg: Record<string, unknown>, path: string[], taken: TakenBytes[]): void {
  for (const field of desc.fields) {
    if (field.oneof) continue; // oneof members live under msg[oneof].value: left to toJson
    const value = msg[field.localName];
    if (field.fieldKind === "scalar" && field.scalar === ScalarType.BYTES) {
      if (value instanceof Uint8Array && value.byteLength > 0) {
        taken.push({ holder: msg, localName: field.localName, value, path: [...path, field.name] });
        msg[field.localName] = new Uint8Array(0);
      }
    } else if (field.fieldKind === "message" && value !== undefined && !field.message.typeName.startsWith("google.protobuf.")) {
      takeBytes(field.message, value as Record<string, unknown>, [...path, field.name], taken);
    }
  }
}

function int64AsNumbers(desc: DescMessage, json: JsonObject): void {
  if (desc.typeName.startsWith("google.protobuf.")) return; // well-known types keep their own JSON
  for (const field of desc.fields) {
    const v = json[field.name];
    if (v === undefined || v === null) continue;
    switch (field.fieldKind) {
      case "scalar":
        if (INT64_TYPES.has(field.scalar)) json[field.name] = Number(v);
        break;
      case "message":
        if (isJsonObject(v)) int64AsNumbers(field.message, v);
        break;
      case "list":
        if (!Array.isArray(v)) break;
        if (field.listKind === "scalar" && INT64_TYPES.has(field.scalar)) json[field.name] = v.map(Number);
        if (field.listKind === "message") for (const item of v) if (isJsonObject(item)) int64AsNumbers(field.message, item);
        break;
      case "map":
        if (!isJsonObject(v)) break;
        for (const [k, item] of Object.entries(v)) {
          if (field.mapKind === "scalar" && INT64_TYPES.has(field.scalar)) v[k] = Number(item);
          if (field.mapKind === "message" && isJsonObject(item)) int64AsNumbers(field.message, item);
        }
        break;
    }
  }
}
