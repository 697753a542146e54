/**
 * Per-client limits at the door (SPEC.md section 9), with real Redis (single and cluster), real
 * HTTP/1.1, HTTP/2 and gRPC clients: the rate and its burst, the requests in flight, the 429
 * `rate_limited` with its headers and details in every protocol, never charged, and a place in
 * flight given back at once by a client that resets.
 */
import http from "node:http";
import http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema, QuotaFailureSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { PalmService } from "../../gen/palm/v1/palm_pb.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import { createMemoryStore } from "../../src/auth/memory-store.js";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { parseRedisClusterNodes, type PlanRateLimits } from "../../src/config.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { cleanupAfterEach } from "../helpers/cleanups.js";
import { callUnary, createGrpcJsClient } from "../helpers/grpc.js";
import { openH2Session } from "../helpers/h2.js";
import { makeImage } from "../helpers/images.js";
import { registerKey } from "../helpers/keys.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { expectErrorBody, postAnalyze } from "../helpers/rest.js";
import { startServer, type TestServer } from "../helpers/server.js";

let redis: RedisProcess;
let analyzer: EngineAnalyzer;
let jpeg: Buffer;
let body: { image: string };
beforeAll(async () => {
  [redis, analyzer, jpeg] = await Promise.all([startRedis(), createTestAnalyzer({ workers: 2 }), makeImage(128, 128, "jpeg")]);
  body = { image: jpeg.toString("base64") };
});
afterAll(async () => {
  await analyzer?.close();
  await redis?.stop();
});

const defer = cleanupAfterEach();

/** A burst of 2 and then one request per 100 s: nothing is earned back while a test runs. */
const TWO_AT_ONCE: PlanRateLimits = { "*": { rate: 0.01, burst: 2, concurrency: 10 } };
/** One request in flight at a time, and a rate no test reaches. */
const ONE_IN_FLIGHT: PlanRateLimits = { "*": { rate: 1000, burst: 1000, concurrency: 1 } };

async function setup(
  rateLimits: PlanRateLimits,
  open: (prefix: string) => RedisStore = (prefix) => createRedisStore({ url: redis.url, keyPrefix: prefix }),
  prefix = uniquePrefix(),
): Promise<{ store: RedisStore; srv: TestServer; prefix: string }> {
  const store = open(prefix);
  defer(() => store.close());
  await store.ready(5000);
  const srv = await startServer({ analyzer, store, config: { rateLimits } });
  defer(() => srv.close());
  return { store, srv, prefix };
}

/**
 * holdOpen starts an Analyze whose body never ends over HTTP/1.1: admitted, it holds its place in
 * flight; `reset` destroys its socket.
 */
function holdOpen(port: number, key: string): { reset(): void; response: Promise<number> } {
  const req = http.request({
    host: "127.0.0.1",
    port,
    path: "/v1/palm/analyze",
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key, "content-length": "100000" },
    agent: false,
  });
  const response = new Promise<number>((resolve) => {
    req.on("response", (res) => resolve(res.statusCode ?? 0));
    req.on("error", () => resolve(0));
  });
  req.write('{"image":"');
  return { reset: () => req.destroy(), response };
}

/** holdOpenH2 is {@link holdOpen} on an HTTP/2 stream; `reset` sends RST_STREAM (CANCEL). */
function holdOpenH2(session: http2.ClientHttp2Session, key: string): { reset(): void } {
  const stream = session.request({
    ":method": "POST",
    ":path": "/v1/palm/analyze",
    "content-type": "application/json",
    "x-api-key": key,
  });
  stream.on("error", () => {});
  stream.write('{"image":"');
  return { reset: () => stream.close(http2.constants.NGHTTP2_CANCEL) };
}

/** inFlightNow is the number of the client's places in flight in Redis. */
async function inFlightNow(prefix: string, clientId: string): Promise<number> {
  const { Redis } = await import("ioredis");
  const r = new Redis(redis.url);
  try {
    return await r.zcard(`${prefix}inflight:${clientId}`);
  } finally {
    r.disconnect();
  }
}

/**
 * commandCalls is Redis's count of commands run so far, by command (INFO commandstats), leaving
 * out those its own connection sends (HELLO, CLIENT, INFO): what the server asked between two calls.
 */
async function commandCalls(): Promise<Record<string, number>> {
  const { Redis } = await import("ioredis");
  const r = new Redis(redis.url);
  try {
    const info = await r.info("commandstats");
    const calls: Record<string, number> = {};
    for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
      if (!["hello", "client", "info"].includes(m[1])) calls[m[1]] = Number(m[2]);
    return calls;
  } finally {
    r.disconnect();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("per-client rate", () => {
  it("refuses the request past the burst with 429 rate_limited, Retry-After and RateLimit headers, and charges nothing", async () => {
    const { store, srv } = await setup(TWO_AT_ONCE);
    const key = await registerKey(store, "acme", "free");
    const first = await postAnalyze(srv.url, body, { "x-api-key": key });
    expect(first.res.status).toBe(200);
    expect(first.res.headers.get("ratelimit-policy")).toBe('"burst";q=2;w=200');
    expect(first.res.headers.get("ratelimit")).toMatch(/^"burst";r=1;t=(99|100)$/);
    expect((await postAnalyze(srv.url, body, { "x-api-key": key })).res.status).toBe(200);

    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(res, json, 429, "rate_limited");
    expect(json.error.message).toBe("Too many requests from this client; retry after the delay in Retry-After.");
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(90);
    expect(Number(res.headers.get("retry-after"))).toBeLessThanOrEqual(100);
    expect(res.headers.get("ratelimit-policy")).toBe('"burst";q=2;w=200');
    expect(res.headers.get("ratelimit")).toMatch(/^"burst";r=0;t=\d+$/);
    expect(await store.usage("acme", quotaPeriodOf())).toBe(2);
    // Another client of the same plan has its own burst.
    const other = await registerKey(store, "other", "free");
    expect((await postAnalyze(srv.url, body, { "x-api-key": other })).res.status).toBe(200);
  });

  it("refuses from the headers: the refused client's body is never read", async () => {
    const { store, srv } = await setup({ "*": { rate: 0.01, burst: 1, concurrency: 10 } });
    const key = await registerKey(store, "acme", "free");
    expect((await postAnalyze(srv.url, body, { "x-api-key": key })).res.status).toBe(200);
    // Announce 7 MiB, send none of it: the 429 comes anyway.
    const status = await new Promise<number>((resolve, reject) => {
      const req = http.request({
        host: "127.0.0.1",
        port: srv.port,
        path: "/v1/palm/analyze",
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key, "content-length": String(7 * 1024 * 1024) },
        agent: false,
      });
      req.on("response", (res) => {
        resolve(res.statusCode ?? 0);
        req.destroy();
      });
      req.on("error", reject);
      req.flushHeaders();
    });
    expect(status).toBe(429);
  });

  it("refuses a client again within its Retry-After without a Redis command, over HTTP/1.1 and HTTP/2", async () => {
    const { store, srv } = await setup(TWO_AT_ONCE);
    const key = await registerKey(store, "acme", "free");
    for (let i = 0; i < 2; i++) expect((await postAnalyze(srv.url, body, { "x-api-key": key })).res.status).toBe(200);
    const first = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(first.res, first.json, 429, "rate_limited");
    const before = await commandCalls();
    const again = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(again.res, again.json, 429, "rate_limited");
    expect(again.json.error.message).toBe(first.json.error.message);
    expect(Number(again.res.headers.get("retry-after"))).toBeGreaterThan(90);
    expect(Number(again.res.headers.get("retry-after"))).toBeLessThanOrEqual(Number(first.res.headers.get("retry-after")));
    expect(again.res.headers.get("ratelimit-policy")).toBe('"burst";q=2;w=200');
    expect(again.res.headers.get("ratelimit")).toMatch(/^"burst";r=0;t=\d+$/);
    const session = await openH2Session(srv.url);
    defer(async () => void session.close());
    const h2 = await new Promise<{ status: number; retryAfter: string }>((resolve, reject) => {
      const stream = session.request({
        ":method": "POST",
        ":path": "/v1/palm/analyze",
        "content-type": "application/json",
        "x-api-key": key,
      });
      stream.on("response", (h) => resolve({ status: Number(h[":status"]), retryAfter: String(h["retry-after"]) }));
      stream.on("error", reject);
      stream.end(JSON.stringify(body));
    });
    expect(h2.status).toBe(429);
    expect(Number(h2.retryAfter)).toBeGreaterThan(90);
    expect(await commandCalls()).toEqual(before);
    expect(await store.usage("acme", quotaPeriodOf())).toBe(2);
  });

  it("answers gRPC with RESOURCE_EXHAUSTED rate_limited, QuotaFailure, RetryInfo and the headers as trailers", async () => {
    const { store, srv } = await setup(TWO_AT_ONCE);
    const key = await registerKey(store, "acme", "free");
    const client = createGrpcJsClient(srv.port);
    defer(async () => client.close());
    for (let i = 0; i < 2; i++)
      expect((await callUnary(client, PalmService.method.analyze, { image: jpeg }, { "x-api-key": key })).error).toBeUndefined();
    // The first refusal is the store's; the second this replica's own (refusedLocally): the same answer.
    for (let i = 0; i < 2; i++) {
      const r = await callUnary(client, PalmService.method.analyze, { image: jpeg }, { "x-api-key": key });
      expect(r.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
      expect(r.connectError?.findDetails(ErrorInfoSchema)[0]).toMatchObject({ reason: "rate_limited", domain: "palm.v1" });
      expect(r.connectError?.findDetails(QuotaFailureSchema)[0]?.violations[0]).toEqual(
        expect.objectContaining({ subject: "client:acme", description: "at most 0.01 requests per second, 2 at once" }),
      );
      const seconds = Number(r.trailer.get("retry-after")[0]);
      expect(Number(r.connectError?.findDetails(RetryInfoSchema)[0]?.retryDelay?.seconds)).toBe(seconds);
      expect(seconds).toBeGreaterThan(90);
      expect(r.trailer.get("ratelimit-policy")).toEqual(['"burst";q=2;w=200']);
      expect(String(r.trailer.get("ratelimit")[0])).toMatch(/^"burst";r=0;t=\d+$/);
    }
    expect(await store.usage("acme", quotaPeriodOf())).toBe(2);
  });

  it("holds the rate across two replicas on one Redis Cluster", async () => {
    const cluster: RedisClusterProcess = await startRedisCluster();
    defer(() => cluster.stop());
    const nodes = parseRedisClusterNodes(cluster.nodes, []);
    const open = (prefix: string) => createRedisStore({ clusterNodes: nodes, keyPrefix: prefix });
    const limits = { "*": { rate: 0.01, burst: 5, concurrency: 100 } };
    const one = await setup(limits, open);
    const two = await setup(limits, open, one.prefix);
    const key = await registerKey(one.store, "acme", "free");
    const results = await Promise.all(
      Array.from({ length: 14 }, (_, i) => postAnalyze((i % 2 ? one : two).srv.url, body, { "x-api-key": key })),
    );
    const statuses = results.map((r) => r.res.status).sort();
    expect(statuses).toEqual([...Array(5).fill(200), ...Array(9).fill(429)]);
    expect(await one.store.usage("acme", quotaPeriodOf())).toBe(5);
  });
});

describe("per-client requests in flight", () => {
  it("refuses a second request while one is in flight, and admits again the moment it ends", async () => {
    const { store, srv, prefix } = await setup(ONE_IN_FLIGHT);
    const key = await registerKey(store, "acme", "free");
    const held = holdOpen(srv.port, key);
    await expect.poll(() => inFlightNow(prefix, "acme"), { timeout: 2000, interval: 10 }).toBe(1);
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(res, json, 429, "rate_limited");
    expect(res.headers.get("retry-after")).toBe("1");
    held.reset();
    await expect.poll(async () => (await postAnalyze(srv.url, body, { "x-api-key": key })).res.status, { timeout: 2000 }).toBe(200);
  });

  it("gives the place back at once every time a client resets, over HTTP/1.1 and HTTP/2", async () => {
    const { store, srv, prefix } = await setup(ONE_IN_FLIGHT);
    const key = await registerKey(store, "acme", "free");
    const session = await openH2Session(srv.url);
    defer(async () => void session.close());
    for (let i = 0; i < 20; i++) {
      const held = i % 2 ? holdOpen(srv.port, key) : holdOpenH2(session, key);
      if (i % 4 < 2) {
        // Reset once admitted.
        await expect.poll(() => inFlightNow(prefix, "acme"), { timeout: 2000, interval: 10 }).toBe(1);
        held.reset();
      } else {
        // Reset while the door may still be asking the store.
        await sleep(i % 3);
        held.reset();
        await sleep(300);
      }
      // Given back at once, not when its lease (30 s) passes.
      await expect.poll(() => inFlightNow(prefix, "acme"), { timeout: 1000, interval: 10 }).toBe(0);
    }
  });
});

describe("a client that resets while the gate decides", () => {
  it("is neither analysed nor charged, over Connect on HTTP/1.1 and HTTP/2", async () => {
    const memory = createMemoryStore();
    // The gate's store step waits, once, until the test has reset the client and the server has seen it.
    let held: { entered: () => void; open: Promise<void> } | undefined;
    const store = new Proxy(memory, {
      get(target, name, receiver) {
        if (name !== "admit") return Reflect.get(target, name, receiver);
        return async (...args: Parameters<typeof memory.admit>) => {
          const h = held;
          held = undefined;
          if (h) {
            h.entered();
            await h.open;
          }
          return target.admit(...args);
        };
      },
    });
    const key = await registerKey(memory, "acme", "pro");
    const srv = await startServer({ analyzer, store, config: { rateLimits: { "*": { rate: 1000, burst: 1000, concurrency: 100 } } } });
    defer(() => srv.close());
    const session = await openH2Session(srv.url);
    defer(async () => void session.close());
    const headers = { "content-type": "application/json", "x-api-key": key };
    const message = JSON.stringify(body);
    let charged = 0;
    for (const version of ["HTTP/1.1", "HTTP/2"]) {
      let entered!: () => void;
      let open!: () => void;
      const inGate = new Promise<void>((r) => (entered = r));
      held = { entered, open: new Promise<void>((r) => (open = r)) };
      const canceled = await canceledCount(srv.url);
      let reset: () => void;
      if (version === "HTTP/1.1") {
        const req = http.request({
          host: "127.0.0.1",
          port: srv.port,
          path: "/palm.v1.PalmService/Analyze",
          method: "POST",
          headers,
          agent: false,
        });
        req.on("error", () => {});
        req.end(message);
        reset = () => req.destroy();
      } else {
        const stream = session.request({ ":method": "POST", ":path": "/palm.v1.PalmService/Analyze", ...headers });
        stream.on("error", () => {});
        stream.end(message);
        reset = () => stream.close(http2.constants.NGHTTP2_CANCEL);
      }
      await inGate;
      reset();
      await expect.poll(() => canceledCount(srv.url), { timeout: 5000, interval: 10 }).toBe(canceled + 1);
      open();
      // The same client's next call, served: the reset one, had it been let through, was ahead of it.
      const res = await fetch(`${srv.url}/palm.v1.PalmService/Analyze`, { method: "POST", headers, body: message });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      charged++;
      await expect.poll(() => analyzer.stats().running + analyzer.stats().queued, { timeout: 60_000, interval: 10 }).toBe(0);
      expect(await memory.usage("acme", quotaPeriodOf())).toBe(charged);
    }
  });
});

/** canceledCount is the server's count of answers to clients that left (palm_requests_total, code "canceled"). */
async function canceledCount(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith("palm_requests_total{") && l.includes('code="canceled"'))
    .reduce((sum, l) => sum + Number(l.split(" ").at(-1)), 0);
}
