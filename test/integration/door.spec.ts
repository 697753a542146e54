/**
 * Issue 20, "one door before any body": a request that is refused from its headers (no key, an
 * unknown key, a store that cannot answer) is answered in its own protocol's wire format while
 * its body is still held back by the client, and the server then ends the stream or connection:
 * the body is never read, decompressed or buffered. Real HTTP/1.1 and HTTP/2 clients, real Redis.
 */
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { generateApiKey } from "../../src/auth/api-key.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { createTestConfig } from "../helpers/config.js";
import { ERRORS, type Reason } from "../../src/errors.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createPalmServer, type PalmServer } from "../../src/server/server.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { registerKey } from "../helpers/keys.js";
import { capturingLogger } from "../helpers/logs.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { openH2Session } from "../helpers/h2.js";
import { localPost, postExpectingContinue } from "../helpers/rest.js";

const ANALYZE = "/palm.v1.PalmService/Analyze";
/** What the clients announce and never send: a whole 8 MiB body. */
const DECLARED = String(8 * 1024 * 1024);

let redis: RedisProcess;
let analyzer: EngineAnalyzer;
beforeAll(async () => {
  [redis, analyzer] = await Promise.all([startRedis(), createTestAnalyzer({ workers: 1 })]);
});
afterAll(async () => {
  await analyzer?.close();
  await redis?.stop();
});

let store: RedisStore;
let server: PalmServer;
let port: number;
let key: string;
let lines: any[];
beforeEach(async () => {
  store = createRedisStore({ url: redis.url, keyPrefix: uniquePrefix(), commandTimeoutMs: 300 });
  await store.ready(5000);
  key = await registerKey(store, "acme", "free");
  lines = [];
  server = createPalmServer({
    analyzer,
    store,
    // A body deadline far beyond the bound below: only a refusal from the headers can answer in time.
    config: createTestConfig({
      port: 0,
      host: "127.0.0.1",
      bodyTimeoutMs: 60_000,
      planLimits: { free: 100, starter: 1000, pro: 10000, tiny: 1 },
    }),
    logger: capturingLogger(lines),
  });
  port = await server.listen();
});
afterEach(async () => {
  redis.resume();
  await server.shutdown(500);
  await store.close();
});

/** within fails with `what` unless `p` settles within a generous bound (liveness, not speed). */
function within<T>(p: Promise<T>, what: string, ms = 5000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const bound = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(what)), ms)));
  return Promise.race([p, bound]).finally(() => clearTimeout(timer));
}

interface Held {
  status: number;
  headers: Record<string, string>;
  body: Buffer;
  /** Resolves when the server ended the stream or connection, the body still unsent. */
  closed: Promise<void>;
}

/** h2Held opens an HTTP/2 stream with `headers` and never sends its body. */
function h2Held(headers: Record<string, string>): Promise<Held> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on("error", reject);
    const stream = session.request({ ":method": "POST", ":path": ANALYZE, "content-length": DECLARED, ...headers }, { endStream: false });
    stream.on("error", () => {}); // a reset after the answer is the server ending the upload
    const closed = new Promise<void>((r) => stream.once("close", () => r()));
    closed.then(() => session.close());
    stream.once("response", (h) => {
      const chunks: Buffer[] = [];
      const own: Record<string, string> = {};
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(":")) own[k] = String(v);
      stream.on("data", (c: Buffer) => chunks.push(c));
      const done = () => resolve({ status: Number(h[":status"]), headers: own, body: Buffer.concat(chunks), closed });
      // A trailers-only answer ends the stream with its headers; others end with their body.
      if (stream.readableEnded) done();
      else stream.once("end", done);
      stream.once("close", done);
    });
  });
}

/** h1Held sends HTTP/1.1 request headers declaring a body and never sends it. */
function h1Held(headers: Record<string, string>, path = ANALYZE): Promise<Held> {
  return new Promise((resolve, reject) => {
    const req = localPost(port, path, { "content-length": DECLARED, ...headers });
    req.on("error", () => {});
    req.once("socket", (socket) => {
      const closed = new Promise<void>((r) => socket.once("close", () => r()));
      req.once("response", (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.once("end", () => {
          const own: Record<string, string> = {};
          for (const [k, v] of Object.entries(res.headers)) own[k] = String(v);
          resolve({ status: res.statusCode ?? 0, headers: own, body: Buffer.concat(chunks), closed });
        });
      });
    });
    req.once("error", reject);
    req.flushHeaders();
  });
}

/** expectGrpcStatus: the status, the table's message and ErrorInfo, a request id and its log line. */
async function expectGrpcStatus(h: Record<string, string>, reason: Reason): Promise<void> {
  expect(h["grpc-status"]).toBe(String(ERRORS[reason].code));
  expect(decodeURIComponent(h["grpc-message"])).toBe(ERRORS[reason].message);
  const web = new Headers();
  for (const [k, v] of Object.entries(h)) web.set(k, v);
  expect(findTrailerError(web)?.findDetails(ErrorInfoSchema)[0]?.reason).toBe(reason);
  await expectLogged(h["x-request-id"], reason);
}

/** expectLogged: one log line of `requestId` with `reason`, written when its response closes (src/server/access-log.ts). */
async function expectLogged(requestId: string | undefined, reason: Reason): Promise<void> {
  expect(requestId).toMatch(/^palm_/);
  const logged = () => lines.some((l) => l.request_id === requestId);
  for (let i = 0; i < 300 && !logged(); i++) await new Promise((r) => setTimeout(r, 10));
  expect(lines.filter((l) => l.request_id === requestId && l.code === reason)).toHaveLength(1);
}

describe("a refusal from the headers, the body held back by the client", () => {
  it("gRPC over HTTP/2 without a key: trailers-only UNAUTHENTICATED missing_api_key, then the stream is ended", async () => {
    const r = await within(h2Held({ "content-type": "application/grpc+proto", te: "trailers" }), "no answer while the body was held back");
    expect(r.status).toBe(200);
    expect(r.body.byteLength).toBe(0);
    await expectGrpcStatus(r.headers, "missing_api_key");
    await within(r.closed, "the stream stayed open");
  });

  it("gRPC over HTTP/2 with an unknown key: invalid_api_key after one Redis lookup", async () => {
    const r = await within(
      h2Held({ "content-type": "application/grpc", te: "trailers", "x-api-key": generateApiKey() }),
      "no answer while the body was held back",
    );
    await expectGrpcStatus(r.headers, "invalid_api_key");
    await within(r.closed, "the stream stayed open");
  });

  it("gRPC with the month's quota used up: RESOURCE_EXHAUSTED quota_exceeded with Retry-After, from the headers", async () => {
    const tiny = await registerKey(store, "tinyco", "tiny");
    const period = quotaPeriodOf();
    await store.reserve("tinyco", period, 1, "r1", 60_000);
    await store.commit("tinyco", period, 1, "r1");
    const r = await within(
      h2Held({ "content-type": "application/grpc", te: "trailers", "x-api-key": tiny }),
      "no answer while the body was held back",
    );
    await expectGrpcStatus(r.headers, "quota_exceeded");
    expect(Number(r.headers["retry-after"])).toBeGreaterThan(0);
    expect(r.headers["x-monthly-quota-remaining"]).toBe("0");
    await within(r.closed, "the stream stayed open");
    expect(await store.usage("tinyco", period)).toBe(1);
  });

  it("gRPC with a gzip-encoded body and no key: refused before anything is decompressed", async () => {
    const r = await within(
      h2Held({ "content-type": "application/grpc", te: "trailers", "grpc-encoding": "gzip" }),
      "no answer while the body was held back",
    );
    await expectGrpcStatus(r.headers, "missing_api_key");
  });

  it("gRPC while Redis hangs: UNAVAILABLE store_unavailable (fail closed), body unread", async () => {
    redis.pause();
    const r = await within(
      h2Held({ "content-type": "application/grpc", te: "trailers", "x-api-key": key }),
      "no answer while the body was held back",
    );
    await expectGrpcStatus(r.headers, "store_unavailable");
    expect(r.headers["x-monthly-quota-remaining"]).toBeUndefined();
  });

  it("gRPC-Web over HTTP/1.1 without a key: the status in the headers, then the connection is closed", async () => {
    const r = await within(h1Held({ "content-type": "application/grpc-web+proto" }), "no answer while the body was held back");
    expect(r.status).toBe(200);
    expect(r.body.byteLength).toBe(0);
    expect(r.headers["content-type"]).toBe("application/grpc-web+proto");
    await expectGrpcStatus(r.headers, "missing_api_key");
    await within(r.closed, "the connection stayed open");
  });

  it("gRPC-Web over HTTP/2 with an unknown key: the status in the headers, then the stream is ended", async () => {
    const r = await within(
      h2Held({ "content-type": "application/grpc-web+proto", "x-api-key": generateApiKey() }),
      "no answer while the body was held back",
    );
    await expectGrpcStatus(r.headers, "invalid_api_key");
    await within(r.closed, "the stream stayed open");
  });

  it("Connect unary over HTTP/1.1 without a key: 401 with the Connect error JSON and ErrorInfo, then the connection is closed", async () => {
    const r = await within(
      h1Held({ "content-type": "application/proto", "connect-protocol-version": "1" }),
      "no answer while the body was held back",
    );
    expect(r.status).toBe(401);
    const json = JSON.parse(r.body.toString());
    expect(json.code).toBe("unauthenticated");
    expect(json.message).toBe(ERRORS.missing_api_key.message);
    expect(json.details?.[0]?.type).toBe("google.rpc.ErrorInfo");
    await expectLogged(r.headers["x-request-id"], "missing_api_key");
    await within(r.closed, "the connection stayed open");
  });

  it("Connect unary over HTTP/2 with an unknown key: 401 invalid_api_key, then the stream is ended", async () => {
    const r = await within(
      h2Held({ "content-type": "application/json", "x-api-key": generateApiKey() }),
      "no answer while the body was held back",
    );
    expect(r.status).toBe(401);
    expect(JSON.parse(r.body.toString()).message).toBe(ERRORS.invalid_api_key.message);
    await expectLogged(r.headers["x-request-id"], "invalid_api_key");
    await within(r.closed, "the stream stayed open");
  });

  it("REST over HTTP/2 with an unknown key: SPEC's 401 JSON, then the stream is ended", async () => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    try {
      const stream = session.request(
        {
          ":method": "POST",
          ":path": "/v1/palm/analyze",
          "content-type": "application/json",
          "content-length": DECLARED,
          "x-api-key": generateApiKey(),
        },
        { endStream: false },
      );
      stream.on("error", () => {});
      const closed = new Promise<void>((r) => stream.once("close", () => r()));
      const answer = await within(
        new Promise<{ status: number; body: string }>((resolve) => {
          let status = 0;
          let body = "";
          stream.once("response", (h) => (status = Number(h[":status"])));
          stream.on("data", (c: Buffer) => (body += c));
          stream.once("end", () => resolve({ status, body }));
        }),
        "no answer while the body was held back",
      );
      expect(answer.status).toBe(401);
      expect(JSON.parse(answer.body).error.code).toBe("invalid_api_key");
      await within(closed, "the stream stayed open");
    } finally {
      session.close();
    }
    expect(await store.usage("acme", quotaPeriodOf())).toBe(0);
  });
});

describe("a client that leaves at the door", () => {
  it("gRPC: a stream reset while its key is checked is logged as canceled at once, Redis still hung, and nothing is charged", async () => {
    redis.pause();
    const session = http2.connect(`http://127.0.0.1:${port}`);
    try {
      const stream = session.request({
        ":method": "POST",
        ":path": ANALYZE,
        "content-type": "application/grpc",
        te: "trailers",
        "x-api-key": key,
      });
      stream.on("error", () => {});
      // A whole (tiny) message: the old path read it, then waited on the key check.
      stream.end(Buffer.from([0, 0, 0, 0, 3, 0x0a, 1, 0xff]));
      await new Promise((r) => setTimeout(r, 100));
      stream.close(http2.constants.NGHTTP2_CANCEL);
      const analyzeLine = () => lines.find((l) => l.method === "palm.v1.PalmService/Analyze");
      // While Redis is still frozen: the door did not wait for the lookup (with the store's
      // 300 ms command timeout, waiting would have logged 503 store_unavailable instead).
      await expect.poll(analyzeLine, { timeout: 5000, interval: 10 }).toBeDefined();
      expect({ status: analyzeLine().status, code: analyzeLine().code }).toEqual({ status: 499, code: "canceled" });
    } finally {
      session.close();
      redis.resume();
    }
    expect(await store.usage("acme", quotaPeriodOf())).toBe(0);
  });
});

/** uploadKeyless sends a whole gRPC message (8 MiB, not an image) on `session`, without a key unless `headers` has one; resolves with its grpc-status (or "reset"). */
function uploadKeyless(session: http2.ClientHttp2Session, headers: Record<string, string> = {}, bytes = 8 * 1024 * 1024): Promise<string> {
  const body = Buffer.alloc(bytes + 5);
  body.writeUInt32BE(bytes, 1);
  return new Promise((resolve) => {
    let outcome = "reset";
    const stream = session.request({ ":method": "POST", ":path": ANALYZE, "content-type": "application/grpc", te: "trailers", ...headers });
    stream.on("response", (h) => (outcome = String(h["grpc-status"] ?? "none")));
    stream.on("trailers", (t) => (outcome = String(t["grpc-status"] ?? outcome)));
    stream.on("error", () => {});
    stream.on("close", () => resolve(outcome));
    stream.resume();
    stream.end(body);
  });
}

const openH2 = () => openH2Session(`http://127.0.0.1:${port}`);

describe("keyless 8 MiB bodies", () => {
  it("take the server at most 64 KiB each on a connection that never showed a key, and that connection goes on serving", async () => {
    // Before: the connection could send 8 MiB ahead and the server read all of it (about 10 ms of
    // its event loop per call), and after some calls the connection stalled.
    const session = await openH2();
    let goaway = false;
    session.once("goaway", () => (goaway = true));
    try {
      for (let i = 0; i < 12; i++) expect(await within(uploadKeyless(session), `keyless call ${i} never ended`)).toBe("16");
      // What went out on the socket: the headers and the 64 KiB each stream's window allowed, not 12 x 8 MiB.
      expect(session.socket.bytesWritten).toBeLessThan(12 * 160 * 1024);
      expect(goaway).toBe(false);
      expect(await within(uploadKeyless(session, { "x-api-key": key }, 1024), "keyed call never ended")).toBe(
        String(ERRORS.invalid_image.code),
      );
    } finally {
      session.destroy();
    }
  });

  it("grpc-js, the real client: 20 keyless 8 MiB calls on one channel are all answered UNAUTHENTICATED missing_api_key", async () => {
    const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
    const message = Buffer.alloc(8 * 1024 * 1024 - 16);
    try {
      const codes: string[] = [];
      for (let i = 0; i < 20; i++) {
        const call = new Promise<string>((resolve) =>
          client.makeUnaryRequest(
            ANALYZE,
            (b: Buffer) => b,
            (b: Buffer) => b,
            message,
            (err) => resolve(err ? `${err.code} ${err.details}` : "ok"),
          ),
        );
        codes.push(await within(call, `grpc-js call ${i} never ended`));
      }
      expect(new Set(codes)).toEqual(new Set([`${grpc.status.UNAUTHENTICATED} ${ERRORS.missing_api_key.message}`]));
    } finally {
      client.close();
    }
  });

  it("on a connection that has had a call admitted, a refused upload also ends with a GOAWAY: no stall, and the next call on a new connection is served", async () => {
    // Before: the refused upload was read on and discarded, and two such calls later the
    // connection stalled (Node does not credit the connection window for a reset stream's DATA).
    let session = await openH2();
    try {
      // A keyed call is admitted (its 1 KiB message is no image: invalid_image), which opens the 8 MiB window.
      const keyed = () => uploadKeyless(session, { "x-api-key": key }, 1024);
      expect(await within(keyed(), "keyed call never ended")).toBe(String(ERRORS.invalid_image.code));
      expect(session.closed).toBe(false);
      for (let i = 0; i < 4; i++) {
        const goaway = new Promise<void>((r) => session.once("goaway", () => r()));
        expect(await within(uploadKeyless(session), `keyless call ${i} never ended`)).toBe("16");
        await within(goaway, "no GOAWAY");
        session.destroy();
        session = await openH2();
        expect(await within(keyed(), `keyed call ${i} never ended`)).toBe(String(ERRORS.invalid_image.code));
      }
    } finally {
      session.destroy();
    }
  });
});

describe("Expect: 100-continue on the RPC paths", () => {
  it("Connect over HTTP/1.1: 100 Continue only once the key is admitted, so a refused client never sends its body", async () => {
    const body = JSON.stringify({ image: Buffer.from("not an image").toString("base64") });
    const attempt = (apiKey?: string) =>
      postExpectingContinue(
        port,
        ANALYZE,
        { "content-type": "application/json", "connect-protocol-version": "1", ...(apiKey ? { "x-api-key": apiKey } : {}) },
        body,
      );
    expect(await within(attempt(), "keyless call never answered")).toEqual({ status: 401, continued: false });
    expect(await within(attempt(key), "keyed call never answered")).toEqual({ status: 400, continued: true });
  });
});
