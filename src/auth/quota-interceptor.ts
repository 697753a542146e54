/**
 * Monthly quota for every protocol (SPEC.md section 5): one unit is reserved atomically before
 * the work and refunded when the work fails for any reason, so only 200s count and concurrent
 * requests on any number of replicas never push usage past the limit. Quota headers (and gRPC
 * metadata) go on every response of a recognised key, success and error alike.
 */
import type { Interceptor } from "@connectrpc/connect";
import type { PlanLimits } from "../config.js";
import { isStoreUnavailableError, palmError, quotaExceeded, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import { randomUUID } from "node:crypto";
import { kPrincipal, kRequestId, kUsage } from "./context-keys.js";
import { quotaPeriodOf, secondsUntilReset, type QuotaPeriod } from "./quota-period.js";
import type { Store } from "./store.js";

/** Quota header names (REST headers; the same lower-case names as gRPC metadata). */
export const QUOTA_HEADERS = Object.freeze({
  limit: "x-monthly-quota-limit",
  remaining: "x-monthly-quota-remaining",
  reset: "x-monthly-quota-reset",
});

/** Refunds that cannot be made are retried for at most 10 minutes, and at most 10,000 at a time. */
const REFUND_RETRY_LIMIT_MS = 10 * 60_000;
const MAX_PENDING_REFUNDS = 10_000;

/** QuotaInterceptorOptions configure {@link createQuotaInterceptor}. */
export interface QuotaInterceptorOptions {
  store: Store;
  planLimits: PlanLimits;
  /** Clock, for tests. Default `() => new Date()`. */
  now?: () => Date;
  /** Logs refunds that failed and are being retried. */
  logger?: Logger;
  /** Delay between retries of failed refunds, ms. Default 1000; each is retried for at most 10 minutes. */
  refundRetryMs?: number;
}

/** setQuotaHeaders writes the three quota headers for `used` of `limit`. */
export function setQuotaHeaders(h: Headers, limit: number, used: number, period: QuotaPeriod): void {
  h.set(QUOTA_HEADERS.limit, String(limit));
  h.set(QUOTA_HEADERS.remaining, String(Math.max(0, limit - used)));
  h.set(QUOTA_HEADERS.reset, String(period.resetsAt));
}

/** createQuotaInterceptor reserves before the work and refunds on failure. Place it after the key check. */
export function createQuotaInterceptor(options: QuotaInterceptorOptions): Interceptor {
  const { store, planLimits } = options;
  const now = options.now ?? (() => new Date());
  const retryMs = options.refundRetryMs ?? 1000;

  // Refunds that could not be made (the store went away) are kept and retried from one timer,
  // so a failed request does not stay charged once the store is back. Refunds are idempotent.
  const pending = new Map<string, { clientId: string; period: QuotaPeriod; since: number }>();
  let timer: NodeJS.Timeout | undefined;
  let flushing = false;
  const flush = async () => {
    if (flushing) return;
    flushing = true;
    try {
      for (const [id, p] of pending) {
        if (Date.now() - p.since > REFUND_RETRY_LIMIT_MS) {
          pending.delete(id);
          options.logger?.error({ client_id: p.clientId, period: p.period.id }, "quota refund abandoned");
          continue;
        }
        try {
          await store.refund(p.clientId, p.period, id);
          pending.delete(id);
        } catch {
          return; // still unavailable: try again at the next tick
        }
      }
    } finally {
      flushing = false;
      if (pending.size === 0 && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    }
  };
  const refundLater = (clientId: string, period: QuotaPeriod, reservationId: string) => {
    if (pending.size >= MAX_PENDING_REFUNDS) {
      options.logger?.error({ client_id: clientId }, "quota refund queue full; refund dropped");
      return;
    }
    pending.set(reservationId, { clientId, period, since: Date.now() });
    timer ??= setInterval(() => void flush(), retryMs).unref();
  };

  return (next) => async (req) => {
    const principal = req.contextValues.get(kPrincipal);
    if (!principal) return next(req); // public method: no quota
    const limit = planLimits[principal.plan];
    if (limit === undefined) {
      throw palmError("internal_error", { cause: new Error(`plan ${JSON.stringify(principal.plan)} is not in PALM_PLAN_LIMITS`) });
    }
    const period = quotaPeriodOf(now());
    const reservationId = req.contextValues.get(kRequestId) ?? randomUUID();
    let reservation;
    try {
      reservation = await store.reserve(principal.clientId, period, limit, reservationId);
    } catch (e) {
      // A reserve whose answer was lost (a timeout on a hung Redis) may still run in the store:
      // take it back once the store answers again, so no failed request stays charged.
      if (isStoreUnavailableError(e) && e.maybeApplied) refundLater(principal.clientId, period, reservationId);
      throw toPalmError(e);
    }
    if (!reservation.granted) {
      const h = new Headers();
      setQuotaHeaders(h, limit, limit, period);
      throw quotaExceeded(principal.clientId, limit, secondsUntilReset(period, now()), h);
    }
    req.contextValues.set(kUsage, { used: reservation.used, limit, plan: principal.plan, resetsAt: period.resetsAt });
    try {
      const res = await next(req);
      setQuotaHeaders(res.header, limit, reservation.used, period);
      return res;
    } catch (e) {
      const err = toPalmError(e);
      let used: number;
      try {
        used = await store.refund(principal.clientId, period, reservationId);
      } catch {
        options.logger?.warn({ client_id: principal.clientId }, "quota refund failed; retrying in the background");
        refundLater(principal.clientId, period, reservationId);
        used = reservation.used - 1;
      }
      setQuotaHeaders(err.metadata, limit, used, period);
      throw err;
    }
  };
}
