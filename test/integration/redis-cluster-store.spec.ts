/**
 * The Redis store on a real three-master Redis Cluster: the shared store suite, the hash-tagged
 * layout (every script and transaction on one slot), failing closed, and the service's
 * configuration of it.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey, hashApiKey } from "../../src/auth/api-key.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { openStore } from "../../src/auth/open-store.js";
import { loadConfig, parseRedisClusterNodes } from "../../src/config.js";
import { isStoreUnavailableError } from "../../src/errors.js";
import { createLogger } from "../../src/log.js";
import { uniquePrefix } from "../helpers/redis.js";
import { startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { startServerProcess } from "../helpers/server-process.js";
import { describeStore } from "../helpers/store-suite.js";

let cluster: RedisClusterProcess;
let raw: Redis[] = [];
const stores: RedisStore[] = [];
beforeAll(async () => {
  cluster = await startRedisCluster();
  raw = cluster.ports.map((port) => new Redis({ host: "127.0.0.1", port }));
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  for (const r of raw) r.disconnect();
  await cluster?.stop();
});

async function open(prefix = uniquePrefix()): Promise<RedisStore> {
  const store = createRedisStore({ clusterNodes: parseRedisClusterNodes(cluster.nodes, []), keyPrefix: prefix });
  stores.push(store);
  await store.ready(5000);
  return store;
}

/** keysOf lists every key under `prefix` on every node, with its node's index and its slot. */
async function keysOf(prefix: string): Promise<{ name: string; node: number; slot: number }[]> {
  const found: { name: string; node: number; slot: number }[] = [];
  for (const [node, r] of raw.entries()) {
    for (const name of await r.keys(`*${prefix}*`)) {
      found.push({ name, node, slot: Number(await r.call("CLUSTER", "KEYSLOT", name)) });
    }
  }
  return found.sort((a, b) => (a.name < b.name ? -1 : 1));
}

describeStore("createRedisStore() on a Redis Cluster", () => open());

describe("createRedisStore() on a Redis Cluster: layout", () => {
  it("keeps every key of a client in the slot of {prefix<id>}, and the key record in a slot of its own", async () => {
    const prefix = uniquePrefix();
    const store = await open(prefix);
    const period = quotaPeriodOf();
    const hash = hashApiKey(generateApiKey());
    await store.createKey("acme", hash, "starter");
    await store.reserve("acme", period, 5, "r1", 60_000);
    const keys = await keysOf(prefix);
    expect(keys.map((k) => k.name)).toEqual([
      `${prefix}key:${hash}`,
      `{${prefix}acme}:client`,
      `{${prefix}acme}:keys`,
      `{${prefix}acme}:quota:${period.id}`,
    ]);
    const clientSlot = Number(await raw[0].call("CLUSTER", "KEYSLOT", `${prefix}acme`));
    for (const k of keys.slice(1)) expect(k.slot, k.name).toBe(clientSlot);
    expect(await store.findKey(hash)).toEqual({ clientId: "acme", plan: "starter" });
  });

  it("spreads clients over the masters, and finds a key by hash prefix on any of them", async () => {
    const prefix = uniquePrefix();
    const store = await open(prefix);
    const hashes: string[] = [];
    for (let i = 0; i < 24; i++) {
      const hash = hashApiKey(generateApiKey());
      hashes.push(hash);
      await store.createKey(`client-${i}`, hash);
    }
    const keys = await keysOf(prefix);
    expect(new Set(keys.filter((k) => k.name.endsWith(":client")).map((k) => k.node)).size).toBeGreaterThan(1);
    expect(new Set(keys.filter((k) => k.name.includes(":key:")).map((k) => k.node)).size).toBe(3);
    // SCAN on one node would miss the key records of the other two.
    for (const hash of hashes) expect(await store.findKeyHashes(hash.slice(0, 16))).toEqual([hash]);
    expect(await store.revokeKey(hashes[7])).toBe(true);
    expect(await store.findKey(hashes[7])).toBeUndefined();
    expect((await store.listKeys("client-7"))[0].revokedAt).toBeTypeOf("number");
  });
});

describe("createRedisStore() on an unreachable cluster", () => {
  it("fails fast with StoreUnavailableError", async () => {
    const store = createRedisStore({ clusterNodes: [{ host: "127.0.0.1", port: 1 }], keyPrefix: uniquePrefix() });
    stores.push(store);
    await expect(store.ready(500)).rejects.toSatisfy(isStoreUnavailableError);
    const started = performance.now();
    await expect(store.findKey("0".repeat(64))).rejects.toSatisfy(isStoreUnavailableError);
    expect(performance.now() - started).toBeLessThan(1000);
  });
});

describe("openStore() with REDIS_CLUSTER_NODES", () => {
  it("opens the cluster store from the configuration", async () => {
    const prefix = uniquePrefix();
    const config = loadConfig({ REDIS_CLUSTER_NODES: `127.0.0.1:${cluster.ports[1]}`, PALM_REDIS_PREFIX: prefix });
    const opened = await openStore(config, createLogger({ level: "silent" }));
    stores.push(opened.store as RedisStore);
    expect(opened.kind).toBe("redis-cluster");
    expect(opened.devKey).toBeUndefined();
    const hash = hashApiKey(generateApiKey());
    await opened.store.createKey("acme", hash);
    expect((await keysOf(prefix)).map((k) => k.name)).toContain(`{${prefix}acme}:client`);
  });
});

describe("palm-api with REDIS_CLUSTER_NODES", () => {
  it("exits 2 naming both variables when REDIS_URL is set too", async () => {
    const started = startServerProcess({ REDIS_URL: "redis://127.0.0.1:6379", REDIS_CLUSTER_NODES: cluster.nodes });
    started.then(
      (server) => server.kill("SIGKILL"),
      () => {},
    ); // one that started anyway is not left running
    await expect(started).rejects.toMatchObject({
      exitCode: 2,
      output: expect.stringContaining("REDIS_URL and REDIS_CLUSTER_NODES are both set"),
    });
  });
});
