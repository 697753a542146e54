/**
 * The per-client gate of the door: each request with a recognised key takes one step of its
 * client's limits in the store ({@link Store.admit}, rate-limit.ts) before its body is read. Over
 * the limits it is refused with 429 `rate_limited` (never charged); admitted, it holds a place in
 * flight until its response closes, however it closes (sent, reset, timed out), and the lease of
 * that place is renewed meanwhile, so a replica that dies gives its places back. A key refused for
 * its rate is refused again by this replica alone until its Retry-After has passed
 * ({@link RateGate.refusedLocally}): only the store ever lets a request in.
 * test/integration/rate-limit.spec.ts pins it over HTTP/1.1, HTTP/2 and gRPC.
 */
import { randomUUID } from "node:crypto";
import type { ConnectError } from "@connectrpc/connect";
import type { PlanRateLimits, RateLimit } from "../config.js";
import { palmError, rateLimited } from "../errors.js";
import type { Logger } from "../log.js";
import type { Principal } from "../request/context-keys.js";
import { type RateDecision, setRateLimitHeaders } from "./rate-limit.js";
import type { Store } from "./store.js";

/** RateGateOptions configure {@link createRateGate}. */
export interface RateGateOptions {
  store: Store;
  /** The configured limits by plan (`*`: every other plan); the store's per-plan settings win. */
  limits: PlanRateLimits;
  /** Lease of a place in flight, ms; renewed every third of it. Default 30000. */
  leaseMs?: number;
  /** How long a plan's setting read from the store is used before it is read again, ms. Default 5000. */
  planCacheMs?: number;
  /** How many keys refused for their rate are remembered at once ({@link RateGate.refusedLocally}). Default 10000. */
  maxRemembered?: number;
  logger?: Logger;
}

/** RateHold is an admitted request's place in flight. */
export interface RateHold {
  /** The RateLimit-Policy and RateLimit headers of the decision, for the response. */
  readonly headers: Headers;
  /** leave gives the place back (idempotent); the store's lease gives it back if this fails. */
  leave(): void;
}

/** RateGate admits requests within their client's limits. */
export interface RateGate {
  /**
   * enter takes one step of the principal's client's limits: resolves with the request's
   * {@link RateHold}, or throws 429 `rate_limited` (or `store_unavailable`, failing closed).
   */
  enter(principal: Principal): Promise<RateHold>;
  /**
   * refusedLocally answers, without the store, a key whose client this replica refused for its
   * rate less than its Retry-After ago: the principal and the 429 `rate_limited` again, with the
   * time left. Undefined otherwise: then the store decides.
   */
  refusedLocally(keyHash: string): { principal: Principal; error: ConnectError } | undefined;
  /** limitOf is the limit applied to `plan` now. */
  limitOf(plan: string): Promise<RateLimit>;
}

/** createRateGate returns the {@link RateGate} over `options.store`. */
export function createRateGate(options: RateGateOptions): RateGate {
  const { store } = options;
  const leaseMs = options.leaseMs ?? 30_000;
  const planCacheMs = options.planCacheMs ?? 5000;
  const cache = new Map<string, { limit: RateLimit | undefined; until: number }>();
  const maxRemembered = options.maxRemembered ?? 10_000;
  // A key refused for its rate, by key hash, until the store's Retry-After counted from when the
  // store was asked: GCRA's arrival time only grows, so the store refuses the client at least
  // that long, and a replica that refuses on its own never lets in more than the store would
  // (test/integration/rate-limit.spec.ts, "without a Redis command"; the rate across replicas).
  // Times on this replica's monotonic clock (performance.now), which a wall-clock step cannot stretch.
  const refused = new Map<string, { principal: Principal; limit: RateLimit; until: number; wholeAt: number }>();

  const remember = (principal: Principal, limit: RateLimit, askedAt: number, decision: RateDecision) => {
    if (refused.size >= maxRemembered) {
      const now = performance.now();
      for (const [hash, r] of refused) if (r.until <= now) refused.delete(hash);
      if (refused.size >= maxRemembered) return;
    }
    refused.set(principal.keyHash, {
      principal,
      limit,
      until: askedAt + decision.retryAfterMs,
      wholeAt: askedAt + decision.resetMs,
    });
  };

  const refusal = (clientId: string, limit: RateLimit, decision: RateDecision, headers: Headers) => {
    const violation =
      decision.limitedBy === "concurrency"
        ? `at most ${limit.concurrency} requests in flight`
        : `at most ${limit.rate} requests per second, ${limit.burst} at once`;
    // Concurrency frees up when one of the client's requests ends: retry in a second.
    const retryAfter = decision.limitedBy === "concurrency" ? 1 : decision.retryAfterMs / 1000;
    return rateLimited(clientId, violation, retryAfter, headers);
  };

  const limitOf = async (plan: string): Promise<RateLimit> => {
    let cached = cache.get(plan);
    if (!cached || cached.until <= Date.now()) {
      // A plan's setting is shared by all its clients and, on a cluster, lives on one node: when it
      // cannot be read, the last one read (else the configuration's) serves for another period, so
      // a node's loss fails only the clients whose own keys it held (quota.spec, "killed master").
      const stored = await store.getPlanRateLimit(plan).then(
        (limit) => ({ limit }),
        () => ({ limit: cached?.limit }),
      );
      cached = { limit: stored.limit, until: Date.now() + planCacheMs };
      cache.set(plan, cached);
    }
    const limit = cached.limit ?? options.limits[plan] ?? options.limits["*"];
    // config.ts always keeps `*`: a plan without limits is a fault, never an unlimited client.
    if (limit === undefined) throw palmError("internal_error", { cause: new Error(`no rate limit for plan ${JSON.stringify(plan)}`) });
    return limit;
  };

  return {
    limitOf,
    refusedLocally(keyHash) {
      const r = refused.get(keyHash);
      if (r === undefined) return undefined;
      const now = performance.now();
      if (r.until <= now) {
        refused.delete(keyHash);
        return undefined;
      }
      const decision: RateDecision = {
        granted: false,
        limitedBy: "rate",
        remaining: 0,
        resetMs: Math.max(0, r.wholeAt - now),
        retryAfterMs: r.until - now,
        inFlight: 0,
      };
      const headers = new Headers();
      setRateLimitHeaders(headers, r.limit, decision);
      return { principal: r.principal, error: refusal(r.principal.clientId, r.limit, decision, headers) };
    },
    async enter(principal) {
      const { clientId, plan } = principal;
      const limit = await limitOf(plan);
      const id = randomUUID();
      const askedAt = performance.now();
      const decision = await store.admit(clientId, limit, id, leaseMs);
      const headers = new Headers();
      setRateLimitHeaders(headers, limit, decision);
      if (!decision.granted) {
        // Only the rate says until when: a place in flight may free up on another replica any time.
        if (decision.limitedBy === "rate") remember(principal, limit, askedAt, decision);
        throw refusal(clientId, limit, decision, headers);
      }
      const renew = setInterval(
        () => {
          store.renewInFlight(clientId, id, leaseMs).catch(() => {});
        },
        Math.max(100, Math.floor(leaseMs / 3)),
      );
      renew.unref();
      let left = false;
      return {
        headers,
        leave() {
          if (left) return;
          left = true;
          clearInterval(renew);
          store.leave(clientId, id).catch(() => {
            options.logger?.warn({ client_id: clientId }, "leaving the in-flight count failed; its lease gives the place back");
          });
        },
      };
    },
  };
}
