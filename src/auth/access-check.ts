/**
 * The door's check of a request's headers (src/server/door.ts), before any body is read: the key
 * is recognised, its plan configured, and its month not used up. The reservation stays the exact
 * quota check; this one only answers early the 429 it would answer
 * (test/integration/rest.spec.ts, "order of checks").
 */
import type { Principal } from "../request/context-keys.js";
import type { PlanLimits } from "../config.js";
import { createKeyCheck } from "./api-key-interceptor.js";
import { quotaPeriodOf } from "./quota-period.js";
import { quotaLimitOf } from "./quota-interceptor.js";
import { exhausted } from "./quota-ticket.js";
import type { Store } from "./store.js";

/** AccessCheckOptions configure {@link createAccessCheck}. */
export interface AccessCheckOptions {
  store: Store;
  planLimits: PlanLimits;
  /** Clock for quota periods (tests). Default: now. */
  now?: () => Date;
}

/**
 * AccessCheck resolves a request's principal from its headers, or throws the refusal;
 * `recognised` hears of the principal as soon as the key is, also when its month is then refused.
 */
export type AccessCheck = (header: Headers, recognised?: (principal: Principal) => void) => Promise<Principal>;

/** createAccessCheck returns the door's {@link AccessCheck}. */
export function createAccessCheck(options: AccessCheckOptions): AccessCheck {
  const { store, planLimits } = options;
  const checkKey = createKeyCheck(store);
  const now = options.now ?? (() => new Date());
  return async (header, recognised) => {
    const principal = await checkKey(header);
    recognised?.(principal);
    const limit = quotaLimitOf(planLimits, principal.plan);
    const at = now();
    const period = quotaPeriodOf(at);
    if ((await store.usage(principal.clientId, period)) >= limit) throw exhausted(principal.clientId, limit, period, at);
    return principal;
  };
}
