/**
 * One request's quota unit as a small state machine (SPEC.md section 5):
 *
 *   none ──reserve──▶ pending ──commit──▶ committed
 *     │                  │
 *     └─────release──────┴──release──▶ released
 *
 * The service reserves once admission control accepted the work (an `overloaded` 503 never holds
 * a unit) and commits once, just before it shapes its 200; the quota interceptor releases on any
 * other outcome (a no-op once committed). While pending, the unit's lease is renewed in the
 * store, so a unit whose replica died is given back when its lease passes
 * (test/integration/quota-leases.spec.ts). test/unit/auth/quota-ticket.spec.ts pins the states.
 */
import type { QuotaTicket, UsageSnapshot } from "../request/context-keys.js";
import { palmError, quotaExceeded, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import { type QuotaPeriod, secondsUntilReset } from "./quota-period.js";
import type { Store } from "./store.js";

/** Quota header names (REST headers; the same lower-case names as gRPC metadata). */
export const QUOTA_HEADERS = Object.freeze({
  limit: "x-monthly-quota-limit",
  remaining: "x-monthly-quota-remaining",
  reset: "x-monthly-quota-reset",
});

/** setQuotaHeaders writes the three quota headers for `held` units of `limit`. */
export function setQuotaHeaders(h: Headers, limit: number, held: number, period: QuotaPeriod): void {
  h.set(QUOTA_HEADERS.limit, String(limit));
  h.set(QUOTA_HEADERS.remaining, String(Math.max(0, limit - held)));
  h.set(QUOTA_HEADERS.reset, String(period.resetsAt));
}

/** exhausted is the 429 of a client whose `limit` units of `period` are all held, as of `now`. */
export function exhausted(clientId: string, limit: number, period: QuotaPeriod, now: Date) {
  const h = new Headers();
  setQuotaHeaders(h, limit, limit, period);
  return quotaExceeded(clientId, limit, secondsUntilReset(period, now), h);
}

/** TicketState is where a {@link Ticket} stands. */
export type TicketState = "none" | "pending" | "committed" | "released";

/** QuotaTicketOptions configure {@link createQuotaTicket}. */
export interface QuotaTicketOptions {
  store: Store;
  clientId: string;
  plan: string;
  limit: number;
  period: QuotaPeriod;
  /** Unique per request: the store's id of the unit. */
  reservationId: string;
  /** Lease of the pending unit, ms; renewed every third of it. */
  leaseMs: number;
  now: () => Date;
  logger?: Logger;
}

/** Ticket is a {@link QuotaTicket} plus what the quota interceptor needs to settle it. */
export interface Ticket extends QuotaTicket {
  readonly state: TicketState;
  /** The client's units held as last seen by this ticket (for the remaining header). */
  readonly held: number;
  /**
   * release drops the pending unit, if any, and returns the units held after (a no-op returning
   * {@link held} once committed); undefined when the store could not say (the lease then gives
   * the unit back).
   */
  release(): Promise<number | undefined>;
}

/** RELEASE_RETRY: how often and how long a release that must not be left to a lease is retried. */
const RELEASE_RETRY = Object.freeze({ everyMs: 1000, forMs: 10 * 60_000 });

/** createQuotaTicket returns a ticket in state `none`. */
export function createQuotaTicket(o: QuotaTicketOptions): Ticket {
  const { store, clientId, period, limit, reservationId } = o;
  let state: TicketState = "none";
  let held = 0;
  let reserving: Promise<void> | undefined;
  let committing: Promise<UsageSnapshot> | undefined;
  // A commit was sent but its answer lost (a store error): it may have committed without a 200.
  let commitUnknown = false;
  let renewTimer: NodeJS.Timeout | undefined;
  const stopRenewing = () => {
    clearInterval(renewTimer);
    renewTimer = undefined;
  };
  const exceeded = () => exhausted(clientId, limit, period, o.now());

  /** none → pending; also pending when the answer was lost (it may have run: the release takes it back). */
  const reserve = (): Promise<void> =>
    (reserving ??= (async () => {
      // Released first (the request ended before the engine admitted its work): a unit reserved
      // now would be released by nobody and held until its lease passed (issue 29, finding 4).
      if (state === "released") throw palmError("canceled");
      let reservation: Awaited<ReturnType<Store["reserve"]>>;
      try {
        reservation = await store.reserve(clientId, period, limit, reservationId, o.leaseMs);
      } catch (e) {
        state = "pending";
        throw toPalmError(e);
      }
      held = reservation.used;
      if (!reservation.granted) throw exceeded();
      state = "pending";
      // A replica that dies stops renewing and the store gives the unit back (quota-leases.spec.ts, SIGKILL case).
      renewTimer = setInterval(
        () => void store.renew(clientId, period, reservationId, o.leaseMs).catch(() => {}),
        Math.max(100, Math.floor(o.leaseMs / 3)),
      );
      renewTimer.unref();
    })());

  /** pending → committed, the one commit of the request. */
  const commit = (): Promise<UsageSnapshot> =>
    (committing ??= (async () => {
      await reserve();
      let answer: Awaited<ReturnType<Store["commit"]>>;
      try {
        answer = await store.commit(clientId, period, limit, reservationId);
      } catch (e) {
        commitUnknown = true;
        throw toPalmError(e);
      }
      held = answer.used;
      // Not committed: the lease lapsed (the store or this replica stalled past it) and others
      // used the last units meanwhile. Answering 200 would push usage past the limit.
      if (!answer.committed) throw exceeded();
      state = "committed";
      stopRenewing();
      return { place: answer.place, limit, plan: o.plan, resetsAt: period.resetsAt };
    })());

  /** none or pending → released; committed stays committed. */
  const release = async (): Promise<number | undefined> => {
    // A reserve still in flight settles first: released before it lands, its unit would stay
    // pending until its lease passed (test/integration/rest.spec.ts, 504 on the deadline).
    if (reserving) await reserving.catch(() => {});
    stopRenewing();
    if (state === "committed") return held;
    const was = state;
    state = "released";
    try {
      held =
        was === "pending"
          ? await store.release(clientId, period, reservationId, { evenCommitted: commitUnknown })
          : await store.usage(clientId, period);
      return held;
    } catch {
      if (was !== "pending") return undefined;
      if (!commitUnknown) {
        o.logger?.warn({ client_id: clientId }, "quota release failed; the unit's lease gives it back");
        return undefined;
      }
      // A committed unit has no lease to lapse: retry until the store answers, every second for up
      // to ten minutes (test/robustness/faults.spec.ts: Redis killed under load, usage equals the 200s).
      o.logger?.warn({ client_id: clientId }, "quota release after a lost commit answer failed; retrying");
      const until = Date.now() + RELEASE_RETRY.forMs;
      const attempt = () => {
        store.release(clientId, period, reservationId, { evenCommitted: true }).catch(() => {
          if (Date.now() < until) setTimeout(attempt, RELEASE_RETRY.everyMs).unref();
        });
      };
      setTimeout(attempt, RELEASE_RETRY.everyMs).unref();
      return undefined;
    }
  };

  return {
    reserve,
    commit,
    release,
    get state() {
      return state;
    },
    get held() {
      return held;
    },
  };
}
