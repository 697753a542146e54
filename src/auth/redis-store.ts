/**
 * The Redis {@link Store} (ioredis), shared by every replica. Layout under the configurable prefix P:
 *
 * - `P key:<sha256>`        hash {client, created, revoked?} — the key itself is never stored;
 * - `P client:<id>`         hash {plan, created};
 * - `P client:<id>:keys`    set of key hashes;
 * - `P usage:<id>:<YYYY-MM>` set of the month's reservation ids (its size is the count),
 *   EXPIREAT 7 days after the month ends.
 *
 * Reserve and refund are Lua scripts, atomic in Redis, so replicas sharing it never overshoot a
 * limit (test/integration/quota.spec.ts). Every connection-level failure becomes
 * StoreUnavailableError (503 store_unavailable, failing closed); the client reconnects on its own.
 */
import { Redis, type RedisOptions } from "ioredis";
import { StoreUnavailableError } from "../errors.js";
import { COUNTER_GRACE_SECONDS } from "./memory-store.js";
import type { QuotaPeriod } from "./quota-period.js";
import type { ClientRecord, KeyOwner, KeyRecord, Reservation, Store } from "./store.js";

/** RedisStoreOptions configure {@link createRedisStore}. */
export interface RedisStoreOptions {
  /** redis:// or rediss:// URL. */
  url: string;
  /** Prefix of every key. Default "palm:". Tests use a unique prefix each. */
  keyPrefix?: string;
  /** Command timeout in ms: a hung Redis fails the request (503) instead of hanging it. Default 1000. */
  commandTimeoutMs?: number;
  /** Called on connection errors (for logging); default: ignore. */
  onError?: (err: Error) => void;
}

// The month's usage is a SET of reservation ids (request ids): its size is the count. Reserving
// the same id twice counts once, and refunding an id that was never reserved changes nothing, so
// a refund sent after a reserve that timed out is always safe.
const RESERVE = `
local used = redis.call('SCARD', KEYS[1])
if redis.call('SISMEMBER', KEYS[1], ARGV[3]) == 1 then return {1, used} end
if used >= tonumber(ARGV[1]) then return {0, used} end
redis.call('SADD', KEYS[1], ARGV[3])
redis.call('EXPIREAT', KEYS[1], ARGV[2])
return {1, used + 1}`;

const REFUND = `
redis.call('SREM', KEYS[1], ARGV[1])
return redis.call('SCARD', KEYS[1])`;

const REVOKE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revoked', ARGV[1])
return 1`;

type ScriptedRedis = Redis & {
  palmReserve(key: string, limit: number, expireAt: number, id: string): Promise<[number, number]>;
  palmRefund(key: string, id: string): Promise<number>;
  palmRevoke(key: string, now: number): Promise<number>;
};

/** RedisStore is a {@link Store} that can also wait for its connection. */
export interface RedisStore extends Store {
  /** ready resolves once connected, or rejects after `timeoutMs`. */
  ready(timeoutMs: number): Promise<void>;
}

/** createRedisStore connects (in the background) and returns the store. */
export function createRedisStore(options: RedisStoreOptions): RedisStore {
  const p = options.keyPrefix ?? "palm:";
  const redisOptions: RedisOptions = {
    // Fail fast while disconnected instead of queueing requests behind a dead connection.
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: options.commandTimeoutMs ?? 1000,
    connectTimeout: 2000,
    // Keep reconnecting forever, at most every second: recovery needs no operator.
    retryStrategy: (times) => Math.min(50 * times, 1000),
  };
  const redis = new Redis(options.url, redisOptions) as ScriptedRedis;
  redis.on("error", (err: Error) => options.onError?.(err));
  redis.defineCommand("palmReserve", { numberOfKeys: 1, lua: RESERVE });
  redis.defineCommand("palmRefund", { numberOfKeys: 1, lua: REFUND });
  redis.defineCommand("palmRevoke", { numberOfKeys: 1, lua: REVOKE });

  const keyKey = (hash: string) => `${p}key:${hash}`;
  const clientKey = (id: string) => `${p}client:${id}`;
  const clientKeysKey = (id: string) => `${p}client:${id}:keys`;
  const usageKey = (id: string, period: QuotaPeriod) => `${p}usage:${id}:${period.id}`;

  async function guard<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      // Refused before sending (offline queue disabled) means it never ran; anything else
      // (timeout, connection lost mid-flight) may have run.
      const maybeApplied = !/isn't writeable/.test(message);
      throw new StoreUnavailableError(`redis ${op} failed: ${message}`, { cause: e, maybeApplied });
    }
  }

  const toKeyRecord = (hash: string, h: Record<string, string>): KeyRecord => ({
    hash,
    clientId: h.client,
    createdAt: Number(h.created),
    ...(h.revoked ? { revokedAt: Number(h.revoked) } : {}),
  });

  const store: RedisStore = {
    ready(timeoutMs: number): Promise<void> {
      if (redis.status === "ready") return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          redis.off("ready", onReady);
          reject(new StoreUnavailableError(`redis not ready after ${timeoutMs} ms`));
        }, timeoutMs);
        const onReady = () => {
          clearTimeout(timer);
          resolve();
        };
        redis.once("ready", onReady);
      });
    },
    findKey: (keyHash) =>
      guard("findKey", async (): Promise<KeyOwner | undefined> => {
        const [clientId, revoked] = await redis.hmget(keyKey(keyHash), "client", "revoked");
        if (!clientId || revoked) return undefined;
        const plan = await redis.hget(clientKey(clientId), "plan");
        return plan ? { clientId, plan } : undefined;
      }),
    reserve: (clientId, period, limit, reservationId) =>
      guard("reserve", async (): Promise<Reservation> => {
        const [granted, used] = await redis.palmReserve(
          usageKey(clientId, period),
          limit,
          period.resetsAt + COUNTER_GRACE_SECONDS,
          reservationId,
        );
        return { granted: granted === 1, used: Number(used) };
      }),
    refund: (clientId, period, reservationId) =>
      guard("refund", async () => Number(await redis.palmRefund(usageKey(clientId, period), reservationId))),
    usage: (clientId, period) => guard("usage", async () => redis.scard(usageKey(clientId, period))),
    createKey: (clientId, keyHash, plan) =>
      guard("createKey", async () => {
        const now = Date.now();
        const m = redis.multi().hsetnx(clientKey(clientId), "created", now);
        if (plan !== undefined) m.hset(clientKey(clientId), "plan", plan);
        else m.hsetnx(clientKey(clientId), "plan", "free");
        m.hset(keyKey(keyHash), "client", clientId, "created", now).sadd(clientKeysKey(clientId), keyHash);
        await m.exec();
        return { hash: keyHash, clientId, createdAt: now };
      }),
    setPlan: (clientId, plan) =>
      guard("setPlan", async (): Promise<ClientRecord> => {
        await redis.multi().hsetnx(clientKey(clientId), "created", Date.now()).hset(clientKey(clientId), "plan", plan).exec();
        const h = await redis.hgetall(clientKey(clientId));
        return { clientId, plan: h.plan, createdAt: Number(h.created) };
      }),
    getClient: (clientId) =>
      guard("getClient", async (): Promise<ClientRecord | undefined> => {
        const h = await redis.hgetall(clientKey(clientId));
        return h.plan ? { clientId, plan: h.plan, createdAt: Number(h.created) } : undefined;
      }),
    revokeKey: (keyHash) => guard("revokeKey", async () => (await redis.palmRevoke(keyKey(keyHash), Date.now())) === 1),
    findKeyHashes: (prefix) =>
      guard("findKeyHashes", async () => {
        if (!/^[0-9a-f]{0,64}$/.test(prefix)) return [];
        const found: string[] = [];
        let cursor = "0";
        do {
          const [next, batch] = await redis.scan(cursor, "MATCH", `${keyKey(prefix)}*`, "COUNT", 1000);
          cursor = next;
          for (const k of batch) found.push(k.slice(keyKey("").length));
        } while (cursor !== "0" && found.length < 10);
        return found.slice(0, 10);
      }),
    listKeys: (clientId) =>
      guard("listKeys", async () => {
        const hashes = await redis.smembers(clientKeysKey(clientId));
        const records: KeyRecord[] = [];
        for (const hash of hashes) {
          const h = await redis.hgetall(keyKey(hash));
          if (h.client) records.push(toKeyRecord(hash, h));
        }
        return records.sort((a, b) => a.createdAt - b.createdAt);
      }),
    async close(): Promise<void> {
      try {
        await redis.quit();
      } catch {
        redis.disconnect();
      }
    },
  };
  return store;
}
