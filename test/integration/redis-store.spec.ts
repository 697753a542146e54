import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { generateApiKey, hashApiKey } from "../../src/auth/api-key.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import { isStoreUnavailableError } from "../../src/errors.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { describeStore } from "../helpers/store-suite.js";

let redis: RedisProcess;
const stores: RedisStore[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await Promise.all(stores.map((s) => s.close()));
  await redis.stop();
});

async function open(): Promise<RedisStore> {
  const store = createRedisStore({ url: redis.url, keyPrefix: uniquePrefix() });
  stores.push(store);
  await store.ready(5000);
  return store;
}

describeStore("createRedisStore()", open);

describe("createRedisStore() counters", () => {
  it("expires a month's counter seven days after the month ends", async () => {
    const prefix = uniquePrefix();
    const store = createRedisStore({ url: redis.url, keyPrefix: prefix });
    stores.push(store);
    await store.ready(5000);
    const period = quotaPeriodOf();
    await store.reserve("acme", period, 10, "r1", 60_000);
    const { Redis } = await import("ioredis");
    const raw = new Redis(redis.url);
    try {
      const expireAt = await raw.expiretime(`${prefix}quota:acme:${period.id}`);
      expect(expireAt).toBe(period.resetsAt + 7 * 24 * 3600);
      // Only the hash of a key is stored, never the key.
      expect(await raw.keys(`${prefix}*`)).toEqual([`${prefix}quota:acme:${period.id}`]);
    } finally {
      raw.disconnect();
    }
  });

  it("keeps the single-Redis key layout of earlier releases (no migration: the cluster's hash tags are not used here)", async () => {
    const prefix = uniquePrefix();
    const store = createRedisStore({ url: redis.url, keyPrefix: prefix });
    stores.push(store);
    await store.ready(5000);
    const period = quotaPeriodOf();
    const hash = hashApiKey(generateApiKey());
    await store.createKey("acme", hash, "starter");
    await store.reserve("acme", period, 10, "r1", 60_000);
    const { Redis } = await import("ioredis");
    const raw = new Redis(redis.url);
    try {
      expect((await raw.keys(`${prefix}*`)).sort()).toEqual(
        [`${prefix}client:acme`, `${prefix}client:acme:keys`, `${prefix}key:${hash}`, `${prefix}quota:acme:${period.id}`].sort(),
      );
    } finally {
      raw.disconnect();
    }
  });

  it("fails with StoreUnavailableError when Redis does not answer", async () => {
    const store = createRedisStore({ url: "redis://127.0.0.1:1", keyPrefix: uniquePrefix() });
    stores.push(store);
    await expect(store.findKey("0".repeat(64))).rejects.toSatisfy(isStoreUnavailableError);
  });
});
