/**
 * Issue 20, finding 6: messages that connect itself refuses (before any interceptor) are answered
 * with the error table's code, message and ErrorInfo on gRPC (raw HTTP/2), gRPC-Web and Connect
 * (unary and streaming, whose status travels in a message at the end of the body), and logged.
 */
import http2 from "node:http2";
import { endStreamFromJson } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { trailerParse } from "@connectrpc/connect/protocol-grpc-web";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { createMemoryStore } from "../../src/auth/memory-store.js";
import { createTestConfig } from "../helpers/config.js";
import { ERRORS } from "../../src/errors.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { MALFORMED_PROTOBUF_MESSAGE } from "../../src/server/rpc-adapter.js";
import { createPalmServer, type PalmServer } from "../../src/server/server.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { registerKey } from "../helpers/keys.js";
import { capturingLogger } from "../helpers/logs.js";

let analyzer: EngineAnalyzer;
let server: PalmServer;
let port: number;
let key: string;
const lines: any[] = [];
beforeAll(async () => {
  analyzer = await createTestAnalyzer();
  const store = createMemoryStore();
  key = await registerKey(store, "acme", "free");
  server = createPalmServer({
    analyzer,
    store,
    config: createTestConfig({ port: 0, host: "127.0.0.1" }),
    logger: capturingLogger(lines),
  });
  port = await server.listen();
});
afterAll(async () => {
  await server?.shutdown(1000);
  await analyzer?.close();
});

const envelope = (flags: number, payload: Uint8Array) => {
  const b = Buffer.alloc(5 + payload.byteLength);
  b[0] = flags;
  b.writeUInt32BE(payload.byteLength, 1);
  Buffer.from(payload).copy(b, 5);
  return b;
};

/** grpcCall sends one raw gRPC request over HTTP/2 and returns its trailers (or trailers-only headers). */
function grpcCall(body: Buffer, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const req = session.request({
      ":method": "POST",
      ":path": "/palm.v1.PalmService/Analyze",
      "content-type": "application/grpc+proto",
      te: "trailers",
      "x-api-key": key,
      ...extra,
    });
    let headers: Record<string, string> = {};
    req.on("response", (h) => (headers = h as Record<string, string>));
    req.on("trailers", (t) => (headers = { ...headers, ...(t as Record<string, string>) }));
    req.on("data", () => {});
    req.on("end", () => {
      session.close();
      resolve(headers);
    });
    req.on("error", reject);
    req.end(body);
  });
}

function expectTableError(t: Record<string, string>, reason: keyof typeof ERRORS, message = ERRORS[reason].message) {
  expect(t["grpc-status"]).toBe(String(ERRORS[reason].code));
  expect(decodeURIComponent(t["grpc-message"])).toBe(message);
  const h = new Headers();
  for (const [k, v] of Object.entries(t)) if (!k.startsWith(":")) h.set(k, String(v));
  expect(findTrailerError(h)?.findDetails(ErrorInfoSchema)[0]?.reason).toBe(reason);
  expect(t["x-request-id"]).toMatch(/^palm_/);
  // One log line with the same request id.
  expect(lines.filter((l) => l.request_id === t["x-request-id"] && l.code === reason)).toHaveLength(1);
}

describe("malformed RPC messages", () => {
  it("answers a truncated protobuf on gRPC with invalid_json (InvalidArgument) and ErrorInfo", async () => {
    // Field 1 (bytes) declares 100 bytes; 3 follow.
    const t = await grpcCall(envelope(0, Uint8Array.from([0x0a, 100, 1, 2, 3])));
    // Words that fit the client's protocol: a protobuf body is not told about JSON (issue 29, finding 5).
    expectTableError(t, "invalid_json", MALFORMED_PROTOBUF_MESSAGE);
    expect(decodeURIComponent(t["grpc-message"])).not.toMatch(/JSON/);
  });

  it("answers a compressed flag without grpc-encoding on gRPC with invalid_json, not INTERNAL", async () => {
    const t = await grpcCall(envelope(1, Uint8Array.from([0x0a, 1, 0xff])));
    expect(t["grpc-status"]).not.toBe("13");
    expectTableError(t, "invalid_json", MALFORMED_PROTOBUF_MESSAGE);
  });

  it("answers a gzip body that is not gzip on gRPC with invalid_json", async () => {
    const t = await grpcCall(envelope(1, Uint8Array.from([1, 2, 3, 4])), { "grpc-encoding": "gzip" });
    expectTableError(t, "invalid_json", MALFORMED_PROTOBUF_MESSAGE);
  });

  it("answers broken Connect JSON with 400, invalid_argument, the table's message and ErrorInfo", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/palm.v1.PalmService/Analyze`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": key },
      body: '{"image": "abc',
    });
    expect(res.status).toBe(400);
    const json = await res.json();
    expect(json.code).toBe("invalid_argument");
    expect(json.message).toBe(ERRORS.invalid_json.message);
    expect(json.details?.[0]?.type).toBe("google.rpc.ErrorInfo");
    const requestId = res.headers.get("x-request-id");
    expect(requestId).toMatch(/^palm_/);
    expect(lines.filter((l) => l.request_id === requestId && l.code === "invalid_json")).toHaveLength(1);
  });

  it("answers a truncated protobuf on gRPC-Web with invalid_json and ErrorInfo in the trailer message", async () => {
    const t = await grpcWebCall(envelope(0, Uint8Array.from([0x0a, 100, 1, 2, 3])));
    expectTableError(t, "invalid_json", MALFORMED_PROTOBUF_MESSAGE);
  });

  it("answers a compressed flag without grpc-encoding on gRPC-Web with invalid_json, not INTERNAL", async () => {
    const t = await grpcWebCall(envelope(1, Uint8Array.from([0x0a, 1, 0xff])));
    expect(t["grpc-status"]).not.toBe("13");
    expectTableError(t, "invalid_json", MALFORMED_PROTOBUF_MESSAGE);
  });

  it("answers a truncated protobuf on Connect streaming (Health/Watch) with invalid_argument, the table's message and ErrorInfo in the end-stream message", async () => {
    const res = await fetch(`http://127.0.0.1:${port}/grpc.health.v1.Health/Watch`, {
      method: "POST",
      headers: { "content-type": "application/connect+proto", "connect-protocol-version": "1" },
      body: new Uint8Array(envelope(0, Uint8Array.from([0x0a, 100, 1, 2, 3]))),
    });
    expect(res.status).toBe(200);
    const frames = splitEnvelopes(Buffer.from(await res.arrayBuffer()));
    expect(frames.map((f) => f.flags)).toEqual([2]);
    const end = endStreamFromJson(frames[0].data);
    expect(end.error?.code).toBe(ERRORS.invalid_json.code);
    expect(end.error?.rawMessage).toBe(MALFORMED_PROTOBUF_MESSAGE);
    expect(end.error?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("invalid_json");
    const requestId = end.metadata.get("x-request-id");
    expect(requestId).toMatch(/^palm_/);
    expect(res.headers.get("x-request-id")).toBe(requestId);
    expect(lines.filter((l) => l.request_id === requestId && l.code === "invalid_json")).toHaveLength(1);
  });
});

function splitEnvelopes(body: Buffer): { flags: number; data: Buffer }[] {
  const out: { flags: number; data: Buffer }[] = [];
  for (let pos = 0; pos + 5 <= body.byteLength; ) {
    const length = body.readUInt32BE(pos + 1);
    out.push({ flags: body[pos], data: body.subarray(pos + 5, pos + 5 + length) });
    pos += 5 + length;
  }
  return out;
}

/** grpcWebCall sends one gRPC-Web request over HTTP/1.1 and returns its trailer message's fields. */
async function grpcWebCall(body: Buffer): Promise<Record<string, string>> {
  const res = await fetch(`http://127.0.0.1:${port}/palm.v1.PalmService/Analyze`, {
    method: "POST",
    headers: { "content-type": "application/grpc-web+proto", "x-api-key": key },
    body: new Uint8Array(body),
  });
  expect(res.status).toBe(200);
  const frames = splitEnvelopes(Buffer.from(await res.arrayBuffer()));
  const trailer = frames.find((f) => (f.flags & 0x80) === 0x80);
  const out: Record<string, string> = {};
  const copy = (v: string, k: string) => {
    out[k] = v;
  };
  res.headers.forEach(copy);
  if (trailer) trailerParse(trailer.data).forEach(copy);
  return out;
}
