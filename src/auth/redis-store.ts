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
 * - `P rate:<id>`           GCRA's theoretical arrival time of the client (ms; expires once passed);
 * - `P inflight:<id>`       sorted set of the client's requests in flight, scored by lease deadline;
 * - `P plan:<name>:rate-limit` hash {rate, burst, concurrency}: a plan's limits set by palmctl.
 *
 * On a Redis Cluster everything of one client carries the hash tag `{P<id>}`, so that it lives
 * in one slot: `{P<id>}:client`, `{P<id>}:keys`, `{P<id>}:quota:<YYYY-MM>`, `{P<id>}:rate`, `{P<id>}:inflight`. The key record
 * `P key:<sha256>` is untagged: it is read before the client is known, by single-key commands,
 * and lives in a slot of its own (see {@link redisKeyLayout}). Client ids contain no `{`, `}` or
 * `:` (palmctl's CLIENT_ID_PATTERN), and a cluster prefix no `{` or `}` (config.ts).
 *
 * Reserve, renew, commit, release and usage are Lua scripts (redis-scripts.ts) on the one key of
 * a client's month, atomic in Redis, so replicas sharing it never overshoot a limit
 * (test/integration/quota.spec.ts, on a single Redis and on a cluster), and each of reserve,
 * commit and usage first drops the pending units whose lease has passed: a unit held by a replica
 * that died is given back by Redis itself (test/integration/quota-leases.spec.ts). Every script and transaction touches one slot
 * (test/integration/redis-cluster-store.spec.ts). Every connection-level failure becomes
 * StoreUnavailableError (503 store_unavailable, failing closed); the client reconnects on its own.
 */
import { Cluster, Redis, type ClusterOptions, type RedisOptions } from "ioredis";
import type { RedisNode } from "../config.js";
import { StoreUnavailableError } from "../errors.js";
import { COUNTER_GRACE_SECONDS } from "./memory-store.js";
import type { QuotaPeriod } from "./quota-period.js";
import { withScripts, type ScriptedRedis } from "./redis-scripts.js";
import type { RateDecision, RateLimit } from "./rate-limit.js";
import type { ClientRecord, Commit, KeyOwner, KeyRecord, ReleaseOptions, Reservation, Store } from "./store.js";

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
  /** A client's GCRA arrival time (rate-limit.ts). */
  rate(clientId: string): string;
  /** A client's requests in flight (sorted set of lease deadlines). */
  inFlight(clientId: string): string;
  /** A plan's stored rate limit (hash {rate, burst, concurrency}), set by palmctl. */
  planRateLimit(plan: string): string;
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
      rate: (id) => `${prefix}rate:${id}`,
      inFlight: (id) => `${prefix}inflight:${id}`,
      planRateLimit: (plan) => `${prefix}plan:${plan}:rate-limit`,
    };
  }
  const tag = (id: string) => `{${prefix}${id}}`;
  return {
    key,
    client: (id) => `${tag(id)}:client`,
    clientKeys: (id) => `${tag(id)}:keys`,
    usage: (id, periodId) => `${tag(id)}:quota:${periodId}`,
    rate: (id) => `${tag(id)}:rate`,
    inFlight: (id) => `${tag(id)}:inflight`,
    planRateLimit: (plan) => `${prefix}plan:${plan}:rate-limit`,
  };
}

/** createRedisStore connects (in the background) and returns the store. */
export function createRedisStore(options: RedisStoreOptions): RedisStore {
  if ((options.url === undefined) === (options.clusterNodes === undefined)) {
    throw new TypeError("createRedisStore: give exactly one of url and clusterNodes");
  }
  const redis = withScripts(connect(options));
  redis.on("error", (err: Error) => options.onError?.(err));
  return new RedisBackedStore(redis, redisKeyLayout(options.keyPrefix ?? "palm:", options.clusterNodes !== undefined));
}

/** connect makes the single-Redis or the cluster client; both fail fast while disconnected. */
function connect({ url, clusterNodes, commandTimeoutMs: commandTimeout = 1000 }: RedisStoreOptions): Redis | Cluster {
  // Keep reconnecting forever, at most every second: recovery needs no operator.
  const retryStrategy = (times: number) => Math.min(50 * times, 1000);
  if (clusterNodes === undefined) {
    const redisOptions: RedisOptions = {
      // Fail fast while disconnected instead of queueing requests behind a dead connection.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout,
      connectTimeout: 2000,
      retryStrategy,
    };
    return new Redis(url as string, redisOptions);
  }
  const clusterOptions: ClusterOptions = {
    // Fail fast while the cluster is not reachable, as on a single Redis. The node connections
    // keep ioredis's own offline queue: a node is connected lazily by its first command.
    enableOfflineQueue: false,
    clusterRetryStrategy: retryStrategy,
    slotsRefreshTimeout: 2000,
    redisOptions: { commandTimeout, connectTimeout: 2000 },
  };
  return new Cluster(
    clusterNodes.map((n) => ({ host: n.host, port: n.port })),
    clusterOptions,
  );
}

/** guard runs one store operation, turning any failure of it into StoreUnavailableError. */
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

/** expireAtOf is when a counter of `period` expires (Unix s), COUNTER_GRACE_SECONDS after its month. */
const expireAtOf = (period: QuotaPeriod) => period.resetsAt + COUNTER_GRACE_SECONDS;

/** leaseOf is a lease in whole milliseconds, at least 1 (the scripts add it to Redis's clock). */
const leaseOf = (leaseMs: number) => Math.max(1, Math.round(leaseMs));

const toKeyRecord = (hash: string, h: Record<string, string>): KeyRecord => ({
  hash,
  clientId: h.client,
  createdAt: Number(h.created),
  ...(h.revoked ? { revokedAt: Number(h.revoked) } : {}),
});

/** RedisBackedStore is the {@link RedisStore} on one connection (single Redis or cluster) and one key layout. */
class RedisBackedStore implements RedisStore {
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly keys: RedisKeyLayout,
  ) {}

  ready(timeoutMs: number): Promise<void> {
    const redis = this.redis;
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
  }

  findKey(keyHash: string): Promise<KeyOwner | undefined> {
    return guard("findKey", async () => {
      const [clientId, revoked] = await this.redis.hmget(this.keys.key(keyHash), "client", "revoked");
      if (!clientId || revoked) return undefined;
      const plan = await this.redis.hget(this.keys.client(clientId), "plan");
      return plan ? { clientId, plan } : undefined;
    });
  }

  reserve(clientId: string, period: QuotaPeriod, limit: number, reservationId: string, leaseMs: number): Promise<Reservation> {
    return guard("reserve", async () => {
      const usage = this.keys.usage(clientId, period.id);
      const [granted, used] = await this.redis.palmReserve(usage, limit, expireAtOf(period), reservationId, leaseOf(leaseMs));
      return { granted: granted === 1, used: Number(used) };
    });
  }

  renew(clientId: string, period: QuotaPeriod, reservationId: string, leaseMs: number): Promise<boolean> {
    return guard(
      "renew",
      async () => (await this.redis.palmRenew(this.keys.usage(clientId, period.id), reservationId, leaseOf(leaseMs))) === 1,
    );
  }

  commit(clientId: string, period: QuotaPeriod, limit: number, reservationId: string): Promise<Commit> {
    return guard("commit", async () => {
      const usage = this.keys.usage(clientId, period.id);
      const [committed, place, used] = await this.redis.palmCommit(usage, limit, expireAtOf(period), reservationId);
      return { committed: committed === 1, place: Number(place), used: Number(used) };
    });
  }

  release(clientId: string, period: QuotaPeriod, reservationId: string, options: ReleaseOptions = {}): Promise<number> {
    return guard("release", async () =>
      Number(await this.redis.palmRelease(this.keys.usage(clientId, period.id), reservationId, options.evenCommitted ? "1" : "0")),
    );
  }

  usage(clientId: string, period: QuotaPeriod): Promise<number> {
    return guard("usage", async () => Number(await this.redis.palmUsage(this.keys.usage(clientId, period.id))));
  }

  admit(clientId: string, limit: RateLimit, requestId: string, leaseMs: number): Promise<RateDecision> {
    return guard("admit", async () => {
      const [granted, by, remaining, resetMs, retryAfterMs, inFlight] = await this.redis.palmRateAdmit(
        this.keys.rate(clientId),
        this.keys.inFlight(clientId),
        limit.rate,
        limit.burst,
        limit.concurrency,
        requestId,
        leaseOf(leaseMs),
      );
      const decision = {
        granted: granted === 1,
        remaining: Number(remaining),
        resetMs: Number(resetMs),
        retryAfterMs: Number(retryAfterMs),
        inFlight: Number(inFlight),
      };
      return by === 0 ? decision : { ...decision, limitedBy: by === 1 ? "rate" : "concurrency" };
    });
  }

  renewInFlight(clientId: string, requestId: string, leaseMs: number): Promise<boolean> {
    return guard(
      "renewInFlight",
      async () => (await this.redis.palmRateRenew(this.keys.inFlight(clientId), requestId, leaseOf(leaseMs))) === 1,
    );
  }

  leave(clientId: string, requestId: string): Promise<number> {
    return guard("leave", async () => {
      const key = this.keys.inFlight(clientId);
      const [, card] = (await this.redis.multi().zrem(key, requestId).zcard(key).exec()) ?? [];
      return Number(card?.[1] ?? 0);
    });
  }

  setPlanRateLimit(plan: string, limit: RateLimit): Promise<void> {
    return guard("setPlanRateLimit", async () => {
      await this.redis.hset(this.keys.planRateLimit(plan), "rate", limit.rate, "burst", limit.burst, "concurrency", limit.concurrency);
    });
  }

  getPlanRateLimit(plan: string): Promise<RateLimit | undefined> {
    return guard("getPlanRateLimit", async () => {
      const h = await this.redis.hgetall(this.keys.planRateLimit(plan));
      if (h.rate === undefined) return undefined;
      return { rate: Number(h.rate), burst: Number(h.burst), concurrency: Number(h.concurrency) };
    });
  }

  createKey(clientId: string, keyHash: string, plan?: string): Promise<KeyRecord> {
    return guard("createKey", async () => {
      const now = Date.now();
      const client = this.keys.client(clientId);
      const m = this.redis.multi().hsetnx(client, "created", now);
      if (plan !== undefined) m.hset(client, "plan", plan);
      else m.hsetnx(client, "plan", "free");
      m.sadd(this.keys.clientKeys(clientId), keyHash);
      if (this.redis instanceof Cluster) {
        // The key record is in another slot: written after the client's transaction, so that a
        // key that resolves always has its client and is listed (a crash in between leaves a
        // listed key that does not resolve, never shown to anyone: palmctl prints it after).
        await m.exec();
        await this.redis.hset(this.keys.key(keyHash), "client", clientId, "created", now);
      } else {
        await m.hset(this.keys.key(keyHash), "client", clientId, "created", now).exec();
      }
      return { hash: keyHash, clientId, createdAt: now };
    });
  }

  setPlan(clientId: string, plan: string): Promise<ClientRecord> {
    return guard("setPlan", async () => {
      const client = this.keys.client(clientId);
      await this.redis.multi().hsetnx(client, "created", Date.now()).hset(client, "plan", plan).exec();
      const h = await this.redis.hgetall(client);
      return { clientId, plan: h.plan, createdAt: Number(h.created) };
    });
  }

  getClient(clientId: string): Promise<ClientRecord | undefined> {
    return guard("getClient", async () => {
      const h = await this.redis.hgetall(this.keys.client(clientId));
      return h.plan ? { clientId, plan: h.plan, createdAt: Number(h.created) } : undefined;
    });
  }

  revokeKey(keyHash: string): Promise<boolean> {
    return guard("revokeKey", async () => (await this.redis.palmRevoke(this.keys.key(keyHash), Date.now())) === 1);
  }

  findKeyHashes(prefix: string): Promise<string[]> {
    return guard("findKeyHashes", async () => {
      if (!/^[0-9a-f]{0,64}$/.test(prefix)) return [];
      const found: string[] = [];
      // Key records are spread over the slots: on a cluster every master holds some.
      const nodes = this.redis instanceof Cluster ? this.redis.nodes("master") : [this.redis];
      for (const node of nodes) {
        let cursor = "0";
        do {
          const [next, batch] = await node.scan(cursor, "MATCH", `${this.keys.key(prefix)}*`, "COUNT", 1000);
          cursor = next;
          for (const k of batch) found.push(k.slice(this.keys.key("").length));
        } while (cursor !== "0" && found.length < 10);
        if (found.length >= 10) break;
      }
      return found.slice(0, 10);
    });
  }

  listKeys(clientId: string): Promise<KeyRecord[]> {
    return guard("listKeys", async () => {
      const hashes = await this.redis.smembers(this.keys.clientKeys(clientId));
      const records: KeyRecord[] = [];
      for (const hash of hashes) {
        const h = await this.redis.hgetall(this.keys.key(hash));
        if (h.client) records.push(toKeyRecord(hash, h));
      }
      return records.sort((a, b) => a.createdAt - b.createdAt);
    });
  }

  async close(): Promise<void> {
    // QUIT waits for an answer that an unreachable Redis never gives: only a connected client
    // says goodbye, and only for a bounded time (palmctl exits within seconds, test/integration/palmctl.spec.ts).
    if (this.redis.status !== "ready") return void this.redis.disconnect();
    const bye = this.redis.quit().catch(() => {});
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, 1000).unref());
    await Promise.race([bye, timeout]);
    this.redis.disconnect();
  }
}
