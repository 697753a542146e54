/**
 * Monthly quota for every protocol (SPEC.md section 5). Each call with a recognised key gets a
 * {@link Ticket} (quota-ticket.ts): the service reserves and commits it; this interceptor
 * releases it on every other outcome. Only 200s count, concurrent requests on any number of
 * replicas never push usage past the limit, and quota headers (and gRPC metadata) go on every
 * response of a recognised key, success and error alike.
 */
import type { Interceptor } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import { kPrincipal, kQuota, kRequestId } from "../request/context-keys.js";
import type { PlanLimits } from "../config.js";
import { palmError, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import { quotaPeriodOf } from "./quota-period.js";
import { createQuotaTicket, setQuotaHeaders } from "./quota-ticket.js";
import type { Store } from "./store.js";

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

/**
 * quotaLimitOf is the monthly limit of `plan`; a plan missing from PALM_PLAN_LIMITS is a
 * configuration fault (`internal_error`), never an unlimited quota.
 */
export function quotaLimitOf(planLimits: PlanLimits, plan: string): number {
  const limit = planLimits[plan];
  if (limit === undefined) {
    throw palmError("internal_error", { cause: new Error(`plan ${JSON.stringify(plan)} is not in PALM_PLAN_LIMITS`) });
  }
  return limit;
}

/**
 * createQuotaInterceptor hands each call with a recognised key its ticket ({@link kQuota}) and
 * releases it when the call ends otherwise than committed. Place it after the key check.
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
    const ticket = createQuotaTicket({
      store,
      clientId: principal.clientId,
      plan: principal.plan,
      limit,
      period,
      reservationId: req.contextValues.get(kRequestId) ?? randomUUID(),
      leaseMs,
      now,
      logger: options.logger,
    });
    req.contextValues.set(kQuota, ticket);
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (e) {
      const err = toPalmError(e);
      const held = await ticket.release();
      if (held !== undefined) setQuotaHeaders(err.metadata, limit, held, period);
      throw err;
    }
    // Committed by the service before its answer (a no-op then); anything else is not charged.
    const held = await ticket.release();
    setQuotaHeaders(res.header, limit, held ?? ticket.held, period);
    return res;
  };
}
