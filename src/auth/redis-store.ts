/**
 * The Redis {@link Store} (ioredis), shared by every replica: on a single Redis or on a Redis
 * Cluster. Layout under the configurable prefix P on a single Redis:
 *
 * - `P key:<sha256>`        hash {client, created, revoked?} — the key itself is never stored;
 * - `P client:<id>`         hash {plan, created};
 * - `P client:<id>:keys`    set of key hashes;
 * - `P quota:<id>:<YYYY-MM>` sorted set of the month's held units by request id: a pending
 *   unit's score is its lease deadline (Unix ms, by Redis's clock), a committed unit's score is
 *   minus its place (-1, -2, ...); its size is the count. EXPIREAT 7 days after the month ends.
 *
 * On a Redis Cluster everything of one client carries the hash tag `{P<id>}`, so that it lives
 * in one slot: `{P<id>}:client`, `{P<id>}:keys`, `{P<id>}:quota:<YYYY-MM>`. The key record
 * `P key:<sha256>` is untagged: it is read before the client is known, by single-key commands,
 * and lives in a slot of its own (see {@link redisKeyLayout}). Client ids contain no `{`, `}` or
 * `:` (palmctl's CLIENT_ID_PATTERN), and a cluster prefix no `{` or `}` (config.ts).
 *
 * Reserve, renew, commit, release and usage are Lua scripts on the one key of a client's month,
 * atomic in Redis, so replicas sharing it never overshoot a limit (test/integration/quota.spec.ts,
 * on a single Redis and on a cluster), and each of reserve, commit and usage first drops the
 * pending units whose lease has passed: a unit held by a replica that died is given back by Redis
 * itself (test/integration/quota-leases.spec.ts). Every script and transaction touches one slot
 * (test/integration/redis-cluster-store.spec.ts). Every connection-level failure becomes
 * StoreUnavailableError (503 store_unavailable, failing closed); the client reconnects on its own.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { RedisNode } from "../config.js";
import { StoreUnavailableError } from "../errors.js";
import { COUNTER_GRACE_SECONDS } from "./memory-store.js";
import type { QuotaPeriod } from "./quota-period.js";
import type { ClientRecord, Commit, KeyOwner, KeyRecord, Reservation, Store } from "./store.js";

/** RedisStoreOptions configure {@link createRedisStore}. */
export interface RedisStoreOptions {
  /** redis:// or rediss:// URL of a single Redis. Exactly one of `url` and `clusterNodes`. */
  url?: string;
  /** Nodes of a Redis Cluster to discover it from (any reachable ones; the rest is learnt from them). */
  clusterNodes?: readonly RedisNode[];
  /** Prefix of every key. Default "palm:". Tests use a unique prefix each. */
  keyPrefix?: string;
  /** Command timeout in ms: a hung Redis fails the request (503) instead of hanging it. Default 1000. */
  commandTimeoutMs?: number;
  /** Called on connection errors (for logging); default: ignore. */
  onError?: (err: Error) => void;
}

// Lapsed leases: pending scores are deadlines in Unix ms (positive), committed ones are -place.
const PRELUDE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, now)
`;

// ARGV: limit, expireAt (Unix s), id, leaseMs. Reserving an id twice counts once (and renews it).
const RESERVE = `${PRELUDE}
local used = redis.call('ZCARD', KEYS[1])
local s = redis.call('ZSCORE', KEYS[1], ARGV[3])
if s then
  if tonumber(s) > 0 then redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3]) end
  return {1, used}
end
if used >= tonumber(ARGV[1]) then return {0, used} end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[3])
redis.call('EXPIREAT', KEYS[1], ARGV[2])
return {1, used + 1}`;

// ARGV: id, leaseMs. Only a pending unit is renewed (XX: a lapsed one is not brought back).
const RENEW = `${PRELUDE}
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not s or tonumber(s) < 0 then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
return 1`;

// ARGV: limit, expireAt, id. Returns {committed, place, used}; idempotent.
const COMMIT = `${PRELUDE}
local s = redis.call('ZSCORE', KEYS[1], ARGV[3])
if s and tonumber(s) < 0 then return {1, -tonumber(s), redis.call('ZCARD', KEYS[1])} end
if not s and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then return {0, 0, redis.call('ZCARD', KEYS[1])} end
local place = redis.call('ZCOUNT', KEYS[1], '-inf', '(0') + 1
redis.call('ZADD', KEYS[1], -place, ARGV[3])
redis.call('EXPIREAT', KEYS[1], ARGV[2])
return {1, place, redis.call('ZCARD', KEYS[1])}`;

// ARGV: id, evenCommitted ('1'). Drops a pending unit; a committed one only with evenCommitted.
const RELEASE = `
local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and (tonumber(s) > 0 or ARGV[2] == '1') then redis.call('ZREM', KEYS[1], ARGV[1]) end
return redis.call('ZCARD', KEYS[1])`;

const USAGE = `${PRELUDE}
return redis.call('ZCARD', KEYS[1])`;

const REVOKE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revoked', ARGV[1])
return 1`;

type ScriptedRedis = (Redis | Cluster) & {
  palmReserve(key: string, limit: number, expireAt: number, id: string, leaseMs: number): Promise<[number, number]>;
  palmRenew(key: string, id: string, leaseMs: number): Promise<number>;
  palmCommit(key: string, limit: number, expireAt: number, id: string): Promise<[number, number, number]>;
  palmRelease(key: string, id: string, evenCommitted: string): Promise<number>;
  palmUsage(key: string): Promise<number>;
  palmRevoke(key: string, now: number): Promise<number>;
};

/** RedisStore is a {@link Store} that can also wait for its connection. */
export interface RedisStore extends Store {
  /** ready resolves once connected, or rejects after `timeoutMs`. */
  ready(timeoutMs: number): Promise<void>;
}

/** RedisKeyLayout names the Redis keys of the store (see the module comment). */
export interface RedisKeyLayout {
  /** The key record of a key hash: read before the client is known, a slot of its own. */
  key(hash: string): string;
  /** A client's hash {plan, created}. */
  client(clientId: string): string;
  /** The set of a client's key hashes. */
  clientKeys(clientId: string): string;
  /** A client's units of one month (sorted set). */
  usage(clientId: string, periodId: string): string;
}

/**
 * redisKeyLayout returns the key names under `prefix`: the single-Redis layout (that of earlier
 * releases, so existing data needs no migration: test/integration/redis-store.spec.ts), or with
 * `cluster` the hash-tagged one, where every key of one client is in the slot of `{prefix<id>}`.
 */
export function redisKeyLayout(prefix: string, cluster: boolean): RedisKeyLayout {
  const key = (hash: string) => `${prefix}key:${hash}`;
  if (!cluster) {
    return {
      key,
      client: (id) => `${prefix}client:${id}`,
      clientKeys: (id) => `${prefix}client:${id}:keys`,
      usage: (id, periodId) => `${prefix}quota:${id}:${periodId}`,
    };
  }
  const tag = (id: string) => `{${prefix}${id}}`;
  return {
    key,
    client: (id) => `${tag(id)}:client`,
    clientKeys: (id) => `${tag(id)}:keys`,
    usage: (id, periodId) => `${tag(id)}:quota:${periodId}`,
  };
}

/** createRedisStore connects (in the background) and returns the store. */
export function createRedisStore(options: RedisStoreOptions): RedisStore {
  const p = options.keyPrefix ?? "palm:";
  const clusterNodes = options.clusterNodes;
  if ((options.url === undefined) === (clusterNodes === undefined)) {
    throw new TypeError("createRedisStore: give exactly one of url and clusterNodes");
  }
  const commandTimeout = options.commandTimeoutMs ?? 1000;
  // Keep reconnecting forever, at most every second: recovery needs no operator.
  const retryStrategy = (times: number) => Math.min(50 * times, 1000);
  let redis: ScriptedRedis;
  if (clusterNodes === undefined) {
    const redisOptions: RedisOptions = {
      // Fail fast while disconnected instead of queueing requests behind a dead connection.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout,
      connectTimeout: 2000,
      retryStrategy,
    };
    redis = new Redis(options.url as string, redisOptions) as ScriptedRedis;
  } else {
    const clusterOptions: ClusterOptions = {
      // Fail fast while the cluster is not reachable, as on a single Redis. The node connections
      // keep ioredis's own offline queue: a node is connected lazily by its first command.
      enableOfflineQueue: false,
      clusterRetryStrategy: retryStrategy,
      slotsRefreshTimeout: 2000,
      redisOptions: { commandTimeout, connectTimeout: 2000 },
    };
    redis = new Cluster(
      clusterNodes.map((n) => ({ host: n.host, port: n.port })),
      clusterOptions,
    ) as ScriptedRedis;
  }
  redis.on("error", (err: Error) => options.onError?.(err));
  redis.defineCommand("palmReserve", { numberOfKeys: 1, lua: RESERVE });
  redis.defineCommand("palmRenew", { numberOfKeys: 1, lua: RENEW });
  redis.defineCommand("palmCommit", { numberOfKeys: 1, lua: COMMIT });
  redis.defineCommand("palmRelease", { numberOfKeys: 1, lua: RELEASE });
  redis.defineCommand("palmUsage", { numberOfKeys: 1, lua: USAGE });
  redis.defineCommand("palmRevoke", { numberOfKeys: 1, lua: REVOKE });

  const layout = redisKeyLayout(p, clusterNodes !== undefined);
  const keyKey = layout.key;
  const clientKey = layout.client;
  const clientKeysKey = layout.clientKeys;
  const usageKey = (id: string, period: QuotaPeriod) => layout.usage(id, period.id);

  async function guard<T>(op: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      // Refused before sending (offline queue disabled) means it never ran; anything else
      // (timeout, connection lost mid-flight) may have run.
      const maybeApplied = !/isn't writeable|Cluster isn't ready/.test(message);
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
    reserve: (clientId, period, limit, reservationId, leaseMs) =>
      guard("reserve", async (): Promise<Reservation> => {
        const [granted, used] = await redis.palmReserve(
          usageKey(clientId, period),
          limit,
          period.resetsAt + COUNTER_GRACE_SECONDS,
          reservationId,
          Math.max(1, Math.round(leaseMs)),
        );
        return { granted: granted === 1, used: Number(used) };
      }),
    renew: (clientId, period, reservationId, leaseMs) =>
      guard(
        "renew",
        async () => (await redis.palmRenew(usageKey(clientId, period), reservationId, Math.max(1, Math.round(leaseMs)))) === 1,
      ),
    commit: (clientId, period, limit, reservationId) =>
      guard("commit", async (): Promise<Commit> => {
        const [committed, place, used] = await redis.palmCommit(
          usageKey(clientId, period),
          limit,
          period.resetsAt + COUNTER_GRACE_SECONDS,
          reservationId,
        );
        return { committed: committed === 1, place: Number(place), used: Number(used) };
      }),
    release: (clientId, period, reservationId, options = {}) =>
      guard("release", async () =>
        Number(await redis.palmRelease(usageKey(clientId, period), reservationId, options.evenCommitted ? "1" : "0")),
      ),
    usage: (clientId, period) => guard("usage", async () => Number(await redis.palmUsage(usageKey(clientId, period)))),
    createKey: (clientId, keyHash, plan) =>
      guard("createKey", async () => {
        const now = Date.now();
        const m = redis.multi().hsetnx(clientKey(clientId), "created", now);
        if (plan !== undefined) m.hset(clientKey(clientId), "plan", plan);
        else m.hsetnx(clientKey(clientId), "plan", "free");
        m.sadd(clientKeysKey(clientId), keyHash);
        if (clusterNodes === undefined) {
          await m.hset(keyKey(keyHash), "client", clientId, "created", now).exec();
        } else {
          // The key record is in another slot: written after the client's transaction, so that a
          // key that resolves always has its client and is listed (a crash in between leaves a
          // listed key that does not resolve, never shown to anyone: palmctl prints it after).
          await m.exec();
          await redis.hset(keyKey(keyHash), "client", clientId, "created", now);
        }
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
        // Key records are spread over the slots: on a cluster every master holds some.
        const nodes = redis instanceof Cluster ? redis.nodes("master") : [redis];
        for (const node of nodes) {
          let cursor = "0";
          do {
            const [next, batch] = await node.scan(cursor, "MATCH", `${keyKey(prefix)}*`, "COUNT", 1000);
            cursor = next;
            for (const k of batch) found.push(k.slice(keyKey("").length));
          } while (cursor !== "0" && found.length < 10);
          if (found.length >= 10) break;
        }
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
      // QUIT waits for an answer that an unreachable Redis never gives: only a connected client
      // says goodbye, and only for a bounded time (palmctl exits within seconds, test/integration/palmctl.spec.ts).
      if (redis.status !== "ready") return void redis.disconnect();
      const bye = redis.quit().catch(() => {});
      const timeout = new Promise<void>((resolve) => setTimeout(resolve, 1000).unref());
      await Promise.race([bye, timeout]);
      redis.disconnect();
    },
  };
  return store;
}
