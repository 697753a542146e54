/**
 * Monthly quota for every protocol (SPEC.md section 5). Each call with a recognised key gets a
 * {@link QuotaTicket}: the service reserves its unit only once admission control accepted the
 * work (an `overloaded` 503 never holds a unit, test/integration/quota-leases.spec.ts), the unit
 * stays pending (its lease renewed in the store) while the work runs, and it is committed when the
 * answer is a 200, released on any other outcome. Only 200s count, concurrent requests on any
 * number of replicas never push usage past the limit, and a unit whose replica died is given back
 * by the store when its lease passes. Quota headers (and gRPC metadata) go on every response of a
 * recognised key, success and error alike.
 */
import type { Interceptor } from "@connectrpc/connect";
import type { PlanLimits } from "../config.js";
import { palmError, quotaExceeded, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import { randomUUID } from "node:crypto";
import { kPrincipal, kQuota, kRequestId, type QuotaTicket, type UsageSnapshot } from "../api/context-keys.js";
import { quotaPeriodOf, secondsUntilReset, type QuotaPeriod } from "./quota-period.js";
import type { Store } from "./store.js";

/** Quota header names (REST headers; the same lower-case names as gRPC metadata). */
export const QUOTA_HEADERS = Object.freeze({
  limit: "x-monthly-quota-limit",
  remaining: "x-monthly-quota-remaining",
  reset: "x-monthly-quota-reset",
});

/** QuotaInterceptorOptions configure {@link createQuotaInterceptor}. */
export interface QuotaInterceptorOptions {
  store: Store;
  planLimits: PlanLimits;
  /** Clock, for tests. Default `() => new Date()`. */
  now?: () => Date;
  /** Logs releases that failed (their unit is given back when its lease passes). */
  logger?: Logger;
  /**
   * Lease of a pending unit, ms (PALM_QUOTA_LEASE_MS); renewed every third of it while the work
   * runs. Default 30000.
   */
  leaseMs?: number;
}

/** setQuotaHeaders writes the three quota headers for `used` of `limit`. */
export function setQuotaHeaders(h: Headers, limit: number, used: number, period: QuotaPeriod): void {
  h.set(QUOTA_HEADERS.limit, String(limit));
  h.set(QUOTA_HEADERS.remaining, String(Math.max(0, limit - used)));
  h.set(QUOTA_HEADERS.reset, String(period.resetsAt));
}

/**
 * quotaLimitOf is the monthly limit of `plan`; a plan missing from PALM_PLAN_LIMITS is a
 * configuration fault (`internal_error`), never an unlimited quota. The door calls it from the
 * headers, before any body is read; the interceptor again for in-process transports.
 */
export function quotaLimitOf(planLimits: PlanLimits, plan: string): number {
  const limit = planLimits[plan];
  if (limit === undefined) {
    throw palmError("internal_error", { cause: new Error(`plan ${JSON.stringify(plan)} is not in PALM_PLAN_LIMITS`) });
  }
  return limit;
}

/**
 * refuseExhausted throws the 429 a client whose month is used up (committed and pending units at
 * its limit) would get from its reservation, so the door can answer it from the headers, before
 * any body is read (test/integration/rest.spec.ts, "order of checks"). The reservation stays the
 * exact check: this one only answers early what it would answer.
 */
export async function refuseExhausted(store: Store, clientId: string, limit: number, now: Date): Promise<void> {
  const period = quotaPeriodOf(now);
  if ((await store.usage(clientId, period)) < limit) return;
  throw exhausted(clientId, limit, period, secondsUntilReset(period, now));
}

/** exhausted is the 429 of a client whose `limit` units of `period` are all held: no unit remaining. */
function exhausted(clientId: string, limit: number, period: QuotaPeriod, retryAfterSeconds: number) {
  const h = new Headers();
  setQuotaHeaders(h, limit, limit, period);
  return quotaExceeded(clientId, limit, retryAfterSeconds, h);
}

/**
 * createQuotaInterceptor hands each call with a recognised key its {@link QuotaTicket}
 * ({@link kQuota}), commits it when the call succeeds (if the service did not already) and
 * releases it when the call fails. Place it after the key check.
 */
export function createQuotaInterceptor(options: QuotaInterceptorOptions): Interceptor {
  const { store, planLimits } = options;
  const now = options.now ?? (() => new Date());
  const leaseMs = options.leaseMs ?? 30_000;

  return (next) => async (req) => {
    const principal = req.contextValues.get(kPrincipal);
    if (!principal) return next(req); // public method: no quota
    const limit = quotaLimitOf(planLimits, principal.plan);
    const period = quotaPeriodOf(now());
    const ticket = createTicket({
      store,
      clientId: principal.clientId,
      plan: principal.plan,
      limit,
      period,
      reservationId: req.contextValues.get(kRequestId) ?? randomUUID(),
      leaseMs,
      retryAfter: () => secondsUntilReset(period, now()),
      logger: options.logger,
    });
    req.contextValues.set(kQuota, ticket);
    try {
      const res = await next(req);
      await ticket.commit(); // a no-op when the service committed before shaping its answer
      setQuotaHeaders(res.header, limit, ticket.held(), period);
      return res;
    } catch (e) {
      const err = toPalmError(e);
      const used = await ticket.release();
      if (used !== undefined) setQuotaHeaders(err.metadata, limit, used, period);
      throw err;
    } finally {
      ticket.stop();
    }
  };
}

interface TicketOptions {
  store: Store;
  clientId: string;
  plan: string;
  limit: number;
  period: QuotaPeriod;
  reservationId: string;
  leaseMs: number;
  retryAfter: () => number;
  logger?: Logger;
}

/** Ticket is a {@link QuotaTicket} plus what the interceptor needs to settle it. */
interface Ticket extends QuotaTicket {
  /** held is the client's units held as last seen by this ticket (for the remaining header). */
  held(): number;
  /**
   * release drops the pending unit, if any, and returns the units held after; undefined when the
   * store could not say (its lease then gives the unit back).
   */
  release(): Promise<number | undefined>;
  /** stop ends the lease renewals. */
  stop(): void;
}

/** RELEASE_RETRY: how often and how long a release that must not be left to a lease is retried. */
const RELEASE_RETRY = Object.freeze({ everyMs: 1000, forMs: 10 * 60_000 });

/**
 * retryRelease retries `release` every second for up to ten minutes, in the background (its
 * timer does not hold the process): pinned by test/robustness/faults.spec.ts (Redis killed under
 * load: usage equals the 200s).
 */
function retryRelease(release: () => Promise<unknown>): void {
  const until = Date.now() + RELEASE_RETRY.forMs;
  const attempt = () => {
    release().catch(() => {
      if (Date.now() < until) setTimeout(attempt, RELEASE_RETRY.everyMs).unref();
    });
  };
  setTimeout(attempt, RELEASE_RETRY.everyMs).unref();
}

function createTicket(o: TicketOptions): Ticket {
  const { store, clientId, period, limit, reservationId } = o;
  let state: "none" | "pending" | "committed" = "none";
  let reserving: Promise<void> | undefined;
  let committing: Promise<UsageSnapshot> | undefined;
  // A commit was sent but its answer lost (a store error): it may have committed without a 200.
  let commitUnknown = false;
  let held = 0;
  let renewTimer: NodeJS.Timeout | undefined;
  const stop = () => {
    clearInterval(renewTimer);
    renewTimer = undefined;
  };

  const reserve = (): Promise<void> =>
    (reserving ??= (async () => {
      let reservation: Awaited<ReturnType<Store["reserve"]>>;
      try {
        reservation = await store.reserve(clientId, period, limit, reservationId, o.leaseMs);
      } catch (e) {
        // A reserve whose answer was lost may still have run in the store: the release after
        // the failure takes it back, or else its lease does.
        state = "pending";
        throw toPalmError(e);
      }
      held = reservation.used;
      if (!reservation.granted) throw exceeded();
      state = "pending";
      // Renew the lease while the work runs; a replica that dies stops renewing and the store
      // gives the unit back (test/integration/quota-leases.spec.ts, SIGKILL case).
      renewTimer = setInterval(
        () => {
          store.renew(clientId, period, reservationId, o.leaseMs).catch(() => {});
        },
        Math.max(100, Math.floor(o.leaseMs / 3)),
      );
      renewTimer.unref();
    })());

  const exceeded = () => exhausted(clientId, limit, period, o.retryAfter());

  return {
    reserve,
    commit: () =>
      (committing ??= (async () => {
        await reserve();
        let commit: Awaited<ReturnType<Store["commit"]>>;
        try {
          commit = await store.commit(clientId, period, limit, reservationId);
        } catch (e) {
          commitUnknown = true;
          throw toPalmError(e);
        }
        held = commit.used;
        // Not committed: the lease lapsed (the store or this replica stalled past it) and others
        // used the last units meanwhile. Answering 200 would push usage past the limit.
        if (!commit.committed) throw exceeded();
        state = "committed";
        stop();
        return { used: commit.place, limit, plan: o.plan, resetsAt: period.resetsAt };
      })()),
    held: () => held,
    async release() {
      // A reserve still in flight settles first: released before it lands, its unit would stay
      // pending until its lease passed (test/integration/rest.spec.ts, 504 on the deadline).
      if (reserving) await reserving.catch(() => {});
      stop();
      if (state === "committed") return held;
      const evenCommitted = commitUnknown;
      try {
        held =
          state === "pending"
            ? await store.release(clientId, period, reservationId, { evenCommitted })
            : await store.usage(clientId, period);
        return held;
      } catch {
        if (state !== "pending") return undefined;
        if (!evenCommitted) {
          o.logger?.warn({ client_id: clientId }, "quota release failed; the unit's lease gives it back");
          return undefined;
        }
        // A committed unit has no lease to lapse: retry until the store answers (bounded).
        o.logger?.warn({ client_id: clientId }, "quota release after a lost commit answer failed; retrying");
        retryRelease(() => store.release(clientId, period, reservationId, { evenCommitted: true }));
        return undefined;
      }
    },
    stop,
  };
}
