/**
 * The Lua scripts of the Redis store, each on one key or on two keys of one client (so one slot on a cluster:
 * test/integration/redis-cluster-store.spec.ts). The quota scripts work on a client's month, a
 * sorted set whose pending units score their lease deadline (Unix ms, by Redis's clock) and whose
 * committed units score minus their place (-1, -2, ...). Reserve, commit and usage first drop
 * the lapsed pending units (test/integration/quota-leases.spec.ts).
 */
import type { Cluster, Redis } from "ioredis";

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

// On a key record; ARGV: now (Unix ms). Returns 0 when there is no such key.
const REVOKE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSETNX', KEYS[1], 'revoked', ARGV[1])
return 1`;

// Per-client limits (rate-limit.ts): KEYS[1] the client's GCRA arrival time (ms), KEYS[2] its
// places in flight (sorted set, member request id, score lease deadline ms); one slot on a
// cluster. ARGV: rate (per s), burst, concurrency, id, leaseMs. Returns {granted, limitedBy
// (0 none, 1 rate, 2 concurrency), remaining, resetMs, retryAfterMs, inFlight}, the arithmetic
// of gcra() in rate-limit.ts. Refused, nothing is written.
const RATE_ADMIT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local interval = 1000 / tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local lease = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], 0, now)
local inflight = redis.call('ZCARD', KEYS[2])
local base = tonumber(redis.call('GET', KEYS[1]) or now)
if base < now then base = now end
local nextTat = base + interval
local allowAt = nextTat - burst * interval
local available = math.max(0, math.floor((now - allowAt) / interval) + 1)
if redis.call('ZSCORE', KEYS[2], ARGV[4]) then
  redis.call('ZADD', KEYS[2], now + lease, ARGV[4])
  return {1, 0, available, math.ceil(base - now), 0, inflight}
end
if now < allowAt then
  return {0, 1, 0, math.ceil(base - now), math.ceil(allowAt - now), inflight}
end
if inflight >= tonumber(ARGV[3]) then
  return {0, 2, available, math.ceil(base - now), 0, inflight}
end
local remaining = math.floor((now - allowAt) / interval)
redis.call('SET', KEYS[1], tostring(nextTat), 'PX', math.ceil(nextTat - now) + 1000)
redis.call('ZADD', KEYS[2], now + lease, ARGV[4])
redis.call('PEXPIRE', KEYS[2], lease * 2)
return {1, 0, remaining, math.ceil(nextTat - now), 0, inflight + 1}`;

// KEYS[1] places in flight; ARGV: id, leaseMs. Only a held place is renewed.
const RATE_RENEW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
return 1`;

const SCRIPTS = {
  palmReserve: RESERVE,
  palmRenew: RENEW,
  palmCommit: COMMIT,
  palmRelease: RELEASE,
  palmUsage: USAGE,
  palmRevoke: REVOKE,
  palmRateRenew: RATE_RENEW,
};

/** Scripts on more than one key (all of one client, one slot). */
const TWO_KEY_SCRIPTS = { palmRateAdmit: RATE_ADMIT };

/** ScriptedRedis is a connection with the scripts defined as commands (see {@link withScripts}). */
export type ScriptedRedis = (Redis | Cluster) & {
  palmReserve(key: string, limit: number, expireAt: number, id: string, leaseMs: number): Promise<[number, number]>;
  palmRenew(key: string, id: string, leaseMs: number): Promise<number>;
  palmCommit(key: string, limit: number, expireAt: number, id: string): Promise<[number, number, number]>;
  palmRelease(key: string, id: string, evenCommitted: string): Promise<number>;
  palmUsage(key: string): Promise<number>;
  palmRevoke(key: string, now: number): Promise<number>;
  palmRateAdmit(
    rateKey: string,
    inFlightKey: string,
    rate: number,
    burst: number,
    concurrency: number,
    id: string,
    leaseMs: number,
  ): Promise<[number, number, number, number, number, number]>;
  palmRateRenew(inFlightKey: string, id: string, leaseMs: number): Promise<number>;
};

/** withScripts defines the scripts as commands of `redis` (EVALSHA, loaded on first use) and returns it. */
export function withScripts(redis: Redis | Cluster): ScriptedRedis {
  for (const [name, lua] of Object.entries(SCRIPTS)) redis.defineCommand(name, { numberOfKeys: 1, lua });
  for (const [name, lua] of Object.entries(TWO_KEY_SCRIPTS)) redis.defineCommand(name, { numberOfKeys: 2, lua });
  return redis as ScriptedRedis;
}
