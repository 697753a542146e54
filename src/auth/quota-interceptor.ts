/**
 * Monthly quota for every protocol (SPEC.md section 5): one unit is reserved atomically before
 * the work and refunded when the work fails for any reason, so only 200s count and concurrent
 * requests on any number of replicas never push usage past the limit. Quota headers (and gRPC
 * metadata) go on every response of a recognised key, success and error alike.
 */
import type { Interceptor } from "@connectrpc/connect";
import type { PlanLimits } from "../config.js";
import { palmError, quotaExceeded, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import { kPrincipal, kUsage } from "./context-keys.js";
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
  /** Logs refunds that failed and are being retried. */
  logger?: Logger;
  /** Delay between retries of a failed refund, ms. Default 1000; retried for at most 10 minutes. */
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

  // A refund that fails (store down right after the work failed) is retried in the background,
  // so a failed request is not left charged once the store is back.
  const retryRefund = (clientId: string, period: QuotaPeriod, attempt: number) => {
    if (attempt * retryMs > 10 * 60_000) {
      options.logger?.error({ client_id: clientId, period: period.id }, "quota refund abandoned");
      return;
    }
    setTimeout(() => {
      store.refund(clientId, period).catch(() => retryRefund(clientId, period, attempt + 1));
    }, retryMs).unref();
  };

  return (next) => async (req) => {
    const principal = req.contextValues.get(kPrincipal);
    if (!principal) return next(req); // public method: no quota
    const limit = planLimits[principal.plan];
    if (limit === undefined) {
      throw palmError("internal_error", { cause: new Error(`plan ${JSON.stringify(principal.plan)} is not in PALM_PLAN_LIMITS`) });
    }
    const period = quotaPeriodOf(now());
    let reservation;
    try {
      reservation = await store.reserve(principal.clientId, period, limit);
    } catch (e) {
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
        used = await store.refund(principal.clientId, period);
      } catch {
        options.logger?.warn({ client_id: principal.clientId }, "quota refund failed; retrying in the background");
        retryRefund(principal.clientId, period, 1);
        used = reservation.used - 1;
      }
      setQuotaHeaders(err.metadata, limit, used, period);
      throw err;
    }
  };
}
