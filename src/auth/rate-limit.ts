/**
 * Per-client limits (SPEC.md section 9): a request rate with a burst, enforced by GCRA (the
 * generic cell rate algorithm: one stored "theoretical arrival time" per client), and a number of
 * requests in flight, each held with a lease like a pending quota unit. Both are decided in one
 * atomic step of the store (`Store.admit`: a Lua script on Redis and Redis Cluster, the same
 * arithmetic in memory), so replicas sharing a store share the limits and a refused request
 * takes nothing from either. test/helpers/store-suite.ts pins the arithmetic on every store.
 */
import type { RateLimit } from "../config.js";

export type { RateLimit };
/** RateDecision is the answer of `Store.admit`. */
export interface RateDecision {
  /** Whether the request may go on (then it holds one place in flight until `Store.leave`). */
  readonly granted: boolean;
  /** What refused it, when not granted. */
  readonly limitedBy?: "rate" | "concurrency";
  /** Requests the client may still send at once within its burst, after this one. */
  readonly remaining: number;
  /** Milliseconds until the burst is whole again. */
  readonly resetMs: number;
  /** Milliseconds until a refused request would be granted by the rate (0 when granted or refused by concurrency). */
  readonly retryAfterMs: number;
  /** The client's requests in flight after the call. */
  readonly inFlight: number;
}

/** GcraStep is one step of {@link gcra}. */
export interface GcraStep {
  /** The new theoretical arrival time to store when granted. */
  readonly tat: number;
  readonly granted: boolean;
  readonly remaining: number;
  readonly resetMs: number;
  readonly retryAfterMs: number;
  /** Requests the burst holds now, before this one is counted. */
  readonly available: number;
  /** Milliseconds until the burst is whole, before this one is counted. */
  readonly resetBeforeMs: number;
}

/**
 * gcra is one GCRA step at `now` (ms) from the stored theoretical arrival time `tat` (undefined:
 * none yet). A request is granted when the new arrival time lies at most `burst` emission
 * intervals ahead of now. The Redis script (redis-scripts.ts, RATE_ADMIT) is the same arithmetic.
 */
export function gcra(tat: number | undefined, now: number, limit: RateLimit): GcraStep {
  const interval = 1000 / limit.rate;
  const base = Math.max(tat ?? now, now);
  const next = base + interval;
  const allowAt = next - limit.burst * interval;
  const before = { available: Math.max(0, Math.floor((now - allowAt) / interval) + 1), resetBeforeMs: Math.ceil(base - now) };
  if (now < allowAt) {
    return { tat: base, granted: false, remaining: 0, resetMs: Math.ceil(base - now), retryAfterMs: Math.ceil(allowAt - now), ...before };
  }
  const remaining = Math.floor((now - allowAt) / interval);
  return { tat: next, granted: true, remaining, resetMs: Math.ceil(next - now), retryAfterMs: 0, ...before };
}

/** RATE_LIMIT_HEADERS are the IETF httpapi draft's header names (gRPC: the same names as metadata). */
export const RATE_LIMIT_HEADERS = Object.freeze({ policy: "ratelimit-policy", state: "ratelimit" });

/** RATE_POLICY_NAME names our one policy in the RateLimit-Policy and RateLimit headers. */
export const RATE_POLICY_NAME = "burst";

/**
 * setRateLimitHeaders writes `RateLimit-Policy: "burst";q=<burst>;w=<s>` (the burst, and the
 * seconds it takes to earn it back) and `RateLimit: "burst";r=<remaining>;t=<s until whole>`.
 */
export function setRateLimitHeaders(h: Headers, limit: RateLimit, decision: RateDecision): void {
  const window = Math.max(1, Math.ceil(limit.burst / limit.rate));
  h.set(RATE_LIMIT_HEADERS.policy, `"${RATE_POLICY_NAME}";q=${limit.burst};w=${window}`);
  h.set(RATE_LIMIT_HEADERS.state, `"${RATE_POLICY_NAME}";r=${decision.remaining};t=${Math.ceil(decision.resetMs / 1000)}`);
}
