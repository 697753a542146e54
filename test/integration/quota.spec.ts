/**
 * Quota and store faults with real Redis: exhaustion, two replicas racing on one Redis and on a
 * Redis Cluster, key revocation, Redis going away and coming back; plus the engine's overload
 * and a fault.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { hashApiKey } from "../../src/auth/api-key.js";
import { quotaPeriodOf, secondsUntilReset } from "../../src/auth/quota-period.js";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { parseRedisClusterNodes } from "../../src/config.js";
import { ERRORS } from "../../src/errors.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createFailingAnalyzer, createTestAnalyzer } from "../helpers/analyzer.js";
import { cleanupAfterEach } from "../helpers/cleanups.js";
import { makeImage } from "../helpers/images.js";
import { registerKey } from "../helpers/keys.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { expectErrorBody, postAnalyze } from "../helpers/rest.js";
import { startServer, type TestServer } from "../helpers/server.js";

const PLANS = { free: 100, starter: 1000, pro: 10000, two: 2, five: 5 };
let redis: RedisProcess;
let analyzer: EngineAnalyzer;
let body: { image: string };
beforeAll(async () => {
  let jpeg: Buffer;
  [redis, analyzer, jpeg] = await Promise.all([startRedis(), createTestAnalyzer({ workers: 2 }), makeImage(128, 128, "jpeg")]);
  body = { image: jpeg.toString("base64") };
});
afterAll(async () => {
  await analyzer?.close();
  await redis?.stop();
});

const defer = cleanupAfterEach();

/** Connect opens the store of one replica; the single Redis unless a test says otherwise. */
type Connect = (prefix: string) => RedisStore;
const singleRedis: Connect = (prefix) => createRedisStore({ url: redis.url, keyPrefix: prefix });

async function setup(prefix = uniquePrefix(), config = {}, connect = singleRedis): Promise<{ store: RedisStore; srv: TestServer }> {
  const store = connect(prefix);
  defer(() => store.close());
  await store.ready(5000);
  const srv = await startServer({ analyzer, store, config: { planLimits: PLANS, ...config } });
  defer(() => srv.close());
  return { store, srv };
}

/**
 * exactQuotaAcrossTwoServers: 12 concurrent requests of one client on a limit of 5, spread over
 * two servers with a store connection each, give exactly five 200s with places 1 to 5.
 */
async function exactQuotaAcrossTwoServers(connect: Connect): Promise<void> {
  const prefix = uniquePrefix();
  const one = await setup(prefix, {}, connect);
  const two = await setup(prefix, {}, connect);
  const key = await registerKey(one.store, "acme", "five");
  const results = await Promise.all(
    Array.from({ length: 12 }, (_, i) => postAnalyze((i % 2 ? one : two).srv.url, body, { "x-api-key": key })),
  );
  const statuses = results.map((r) => r.res.status);
  expect(statuses.filter((s) => s === 200)).toHaveLength(5);
  // The rest: 429, or 503 overloaded when the shared engine (2 workers, 4 queued) had no place:
  // the unit is reserved only after admission.
  expect(statuses.filter((s) => s === 429 || s === 503)).toHaveLength(7);
  expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(1);
  const used = results
    .filter((r) => r.res.status === 200)
    .map((r) => r.json.usage.requests_used)
    .sort();
  expect(used).toEqual([1, 2, 3, 4, 5]);
  expect(await one.store.usage("acme", quotaPeriodOf())).toBe(5);
}

describe("createQuotaInterceptor() with Redis", () => {
  it("rejects the call after the plan's limit with 429 quota_exceeded, Retry-After and Remaining 0", async () => {
    const { store, srv } = await setup();
    const key = await registerKey(store, "acme", "two");
    for (const n of [1, 2]) {
      const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
      expect(res.status).toBe(200);
      expect(json.usage.requests_used).toBe(n);
      expect(res.headers.get("x-monthly-quota-remaining")).toBe(String(2 - n));
    }
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(res, json, 429, "quota_exceeded");
    expect(json.error.message).toBe(ERRORS.quota_exceeded.message);
    const retryAfter = Number(res.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(0);
    expect(Math.abs(retryAfter - secondsUntilReset(quotaPeriodOf()))).toBeLessThanOrEqual(2);
    expect(res.headers.get("x-monthly-quota-remaining")).toBe("0");
    expect(res.headers.get("x-monthly-quota-limit")).toBe("2");
    expect(res.headers.get("x-monthly-quota-reset")).toBe(String(quotaPeriodOf().resetsAt));
    expect(await store.usage("acme", quotaPeriodOf())).toBe(2);
  });

  it("shares one quota between the keys of a client", async () => {
    const { store, srv } = await setup();
    const a = await registerKey(store, "acme", "two");
    const b = await registerKey(store, "acme", "two");
    expect((await postAnalyze(srv.url, body, { "x-api-key": a })).res.status).toBe(200);
    expect((await postAnalyze(srv.url, body, { "x-api-key": b })).json.usage.requests_used).toBe(2);
    expect((await postAnalyze(srv.url, body, { "x-api-key": a })).res.status).toBe(429);
  });

  it("lets exactly the limit of 12 concurrent requests succeed across two servers sharing Redis", () =>
    exactQuotaAcrossTwoServers(singleRedis));

  it("rejects a key with 401 invalid_api_key right after it is revoked", async () => {
    const { store, srv } = await setup();
    const key = await registerKey(store, "acme", "five");
    expect((await postAnalyze(srv.url, body, { "x-api-key": key })).res.status).toBe(200);
    await store.revokeKey(hashApiKey(key));
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(res, json, 401, "invalid_api_key");
    expect(await store.usage("acme", quotaPeriodOf())).toBe(1);
  });

  it("fails closed with 503 store_unavailable while Redis is down and recovers by itself", async () => {
    const { store, srv } = await setup();
    const key = await registerKey(store, "acme", "five");
    expect((await postAnalyze(srv.url, body, { "x-api-key": key })).res.status).toBe(200);
    await redis.stop();
    try {
      const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
      expectErrorBody(res, json, 503, "store_unavailable");
      expect(json.error.message).toBe(ERRORS.store_unavailable.message);
      // Health needs no store.
      expect((await fetch(`${srv.url}/v1/palm/health`)).status).toBe(200);
    } finally {
      await redis.start(); // no persistence: the restarted Redis is empty
    }
    const again = await registerKey(store, "acme", "five").catch(async () => {
      await store.ready(5000);
      return registerKey(store, "acme", "five");
    });
    await expect
      .poll(async () => (await postAnalyze(srv.url, body, { "x-api-key": again })).res.status, { timeout: 10_000, interval: 200 })
      .toBe(200);
  });
});

describe("createQuotaInterceptor() with a Redis Cluster", () => {
  let cluster: RedisClusterProcess;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it("lets exactly the limit of 12 concurrent requests succeed across two servers sharing a three-master cluster", () =>
    exactQuotaAcrossTwoServers((prefix) =>
      createRedisStore({ clusterNodes: parseRedisClusterNodes(cluster.nodes, []), keyPrefix: prefix }),
    ));

  // Last in this block: it takes a master away for good.
  it("fails closed with 503 store_unavailable for the clients of a killed master, within the command timeout, and serves the others", async () => {
    const prefix = uniquePrefix();
    const { store, srv } = await setup(prefix, {}, (p) =>
      createRedisStore({ clusterNodes: parseRedisClusterNodes(cluster.nodes, []), keyPrefix: p }),
    );
    const { Redis } = await import("ioredis");
    const doomed = new Redis({ host: "127.0.0.1", port: cluster.ports[0] });
    // A node answers MOVED for a key of a slot it does not serve.
    const isOnDoomed = async (name: string) =>
      (await doomed.exists(name).catch((e: Error) => (/^MOVED /.test(e.message) ? 0 : Promise.reject(e)))) === 1;
    const clients: { key: string; onDoomed: boolean }[] = [];
    try {
      for (let i = 0; i < 12; i++) {
        const key = await registerKey(store, `client-${i}`, "five");
        // A request needs the key record's slot and the client's slot: either on the killed node fails it.
        const onDoomed = (await isOnDoomed(`${prefix}key:${hashApiKey(key)}`)) || (await isOnDoomed(`{${prefix}client-${i}}:client`));
        clients.push({ key, onDoomed });
      }
    } finally {
      doomed.disconnect();
    }
    expect(clients.filter((c) => c.onDoomed).length).toBeGreaterThan(0);
    expect(clients.filter((c) => !c.onDoomed).length).toBeGreaterThan(0);
    await cluster.killNode(0);
    for (const { key, onDoomed } of clients) {
      const started = performance.now();
      const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
      if (onDoomed) {
        expectErrorBody(res, json, 503, "store_unavailable");
        expect(performance.now() - started).toBeLessThan(3000);
      } else {
        expect(res.status).toBe(200);
      }
    }
  });
});

describe("createRedisStore() under a hung Redis", () => {
  it("fails closed with 503 store_unavailable while Redis hangs, then serves again with the counts intact", async () => {
    const { store, srv } = await setup();
    const key = await registerKey(store, "acme", "five");
    expect((await postAnalyze(srv.url, body, { "x-api-key": key })).res.status).toBe(200);
    redis.pause();
    try {
      const started = Date.now();
      const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
      expectErrorBody(res, json, 503, "store_unavailable");
      expect(Date.now() - started).toBeLessThan(5000); // the command timeout, not forever
    } finally {
      redis.resume();
    }
    const again = await postAnalyze(srv.url, body, { "x-api-key": key });
    expect(again.res.status).toBe(200);
    expect(again.json.usage.requests_used).toBe(2);
    expect(await store.usage("acme", quotaPeriodOf())).toBe(2);
  });
});

describe("engine faults through the service", () => {
  it("answers 503 overloaded with Retry-After when the replica's queue is full, charging only the 200s", async () => {
    const small = await createTestAnalyzer({ workers: 1, maxQueue: 0 });
    defer(() => small?.close());
    const store = createRedisStore({ url: redis.url, keyPrefix: uniquePrefix() });
    defer(() => store.close());
    await store.ready(5000);
    const srv = await startServer({ analyzer: small, store, config: { planLimits: PLANS } });
    defer(() => srv.close());
    const key = await registerKey(store, "acme", "free");
    const results = await Promise.all(Array.from({ length: 4 }, () => postAnalyze(srv.url, body, { "x-api-key": key })));
    const ok = results.filter((r) => r.res.status === 200);
    const overloaded = results.filter((r) => r.res.status === 503);
    expect(ok.length).toBeGreaterThanOrEqual(1);
    expect(overloaded.length).toBeGreaterThanOrEqual(1);
    for (const r of overloaded) {
      expectErrorBody(r.res, r.json, 503, "overloaded");
      expect(Number(r.res.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      expect(r.res.headers.get("x-monthly-quota-limit")).toBe("100");
    }
    expect(await store.usage("acme", quotaPeriodOf())).toBe(ok.length);
  });

  it("answers 500 internal_error with a generic message and no internals, refunding the quota", async () => {
    const failing = createFailingAnalyzer(analyzer.model, new Error("onnx session exploded at /srv/secret/path.onnx"));
    const store = createRedisStore({ url: redis.url, keyPrefix: uniquePrefix() });
    defer(() => store.close());
    await store.ready(5000);
    const srv = await startServer({ analyzer: failing, store, config: { planLimits: PLANS } });
    defer(() => srv.close());
    const key = await registerKey(store, "acme", "free");
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(res, json, 500, "internal_error");
    expect(json.error.message).toBe(ERRORS.internal_error.message);
    expect(JSON.stringify(json)).not.toMatch(/onnx|secret|exploded|at /);
    expect(res.headers.get("x-monthly-quota-remaining")).toBe("100");
    expect(await store.usage("acme", quotaPeriodOf())).toBe(0);
  });
});
