/**
 * Store selection from configuration: Redis when REDIS_URL is set, a Redis Cluster when
 * REDIS_CLUSTER_NODES is (config.ts refuses both), else the embedded in-memory store (with the
 * development key of PALM_DEV_KEY, or a generated one).
 */
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import { generateApiKey, hashApiKey } from "./api-key.js";
import { createMemoryStore } from "./memory-store.js";
import { createRedisStore } from "./redis-store.js";
import type { Store } from "./store.js";

/** OpenedStore is the store plus, for the in-memory store, the development key. */
export interface OpenedStore {
  store: Store;
  kind: "redis" | "redis-cluster" | "memory";
  /** The development key (in-memory store only). */
  devKey?: string;
  /** Whether devKey was generated at this start (then it must be shown once). */
  devKeyGenerated?: boolean;
}

/** DEV_CLIENT_ID and DEV_PLAN: who the development key belongs to. */
export const DEV_CLIENT_ID = "dev";
export const DEV_PLAN = "pro";

/**
 * openStore opens the configured store. With Redis (single or cluster) it waits up to 5 s for
 * the connection and starts anyway when Redis is not there yet (requests fail closed with 503
 * until it is).
 */
export async function openStore(config: Config, logger: Logger): Promise<OpenedStore> {
  if (config.redisUrl !== undefined || config.redisClusterNodes !== undefined) {
    let lastError = "";
    const store = createRedisStore({
      url: config.redisUrl,
      clusterNodes: config.redisClusterNodes,
      keyPrefix: config.redisKeyPrefix,
      commandTimeoutMs: config.redisCommandTimeoutMs,
      onError: (err) => {
        if (err.message !== lastError) logger.warn({ err: err.message }, "redis connection error");
        lastError = err.message;
      },
    });
    try {
      await store.ready(5000);
    } catch {
      logger.warn("redis is not reachable yet; requests answer 503 store_unavailable until it is");
    }
    return { store, kind: config.redisClusterNodes === undefined ? "redis" : "redis-cluster" };
  }
  const store = createMemoryStore();
  const devKey = config.devKey ?? generateApiKey();
  await store.createKey(DEV_CLIENT_ID, hashApiKey(devKey), DEV_PLAN);
  return { store, kind: "memory", devKey, devKeyGenerated: config.devKey === undefined };
}
