/**
 * The embedded in-memory store: the default when neither REDIS_URL nor REDIS_CLUSTER_NODES is
 * set. A real implementation of {@link Store} for one process (quota is exact within the
 * process; nothing is persisted).
 */
import type { ClientRecord, Commit, KeyOwner, KeyRecord, ReleaseOptions, Reservation, Store } from "./store.js";
import type { QuotaPeriod } from "./quota-period.js";
import { gcra, type RateDecision, type RateLimit } from "./rate-limit.js";

/** createMemoryStore returns an empty in-memory {@link Store}. */
export function createMemoryStore(): Store {
  const keys = new Map<string, KeyRecord>();
  const clients = new Map<string, ClientRecord>();
  return {
    async findKey(keyHash: string): Promise<KeyOwner | undefined> {
      const k = keys.get(keyHash);
      if (!k || k.revokedAt !== undefined) return undefined;
      const c = clients.get(k.clientId);
      return c ? { clientId: c.clientId, plan: c.plan } : undefined;
    },
    ...memoryQuota(),
    ...memoryRateGate(),
    async createKey(clientId: string, keyHash: string, plan?: string): Promise<KeyRecord> {
      if (plan !== undefined) await this.setPlan(clientId, plan);
      else if (!clients.has(clientId)) await this.setPlan(clientId, "free");
      const record: KeyRecord = { hash: keyHash, clientId, createdAt: Date.now() };
      keys.set(keyHash, record);
      return record;
    },
    async setPlan(clientId: string, plan: string): Promise<ClientRecord> {
      const prev = clients.get(clientId);
      const record: ClientRecord = { clientId, plan, createdAt: prev?.createdAt ?? Date.now() };
      clients.set(clientId, record);
      return record;
    },
    async getClient(clientId: string): Promise<ClientRecord | undefined> {
      return clients.get(clientId);
    },
    async revokeKey(keyHash: string): Promise<boolean> {
      const k = keys.get(keyHash);
      if (!k) return false;
      if (k.revokedAt === undefined) keys.set(keyHash, { ...k, revokedAt: Date.now() });
      return true;
    },
    async findKeyHashes(prefix: string): Promise<string[]> {
      return [...keys.keys()].filter((h) => h.startsWith(prefix)).slice(0, 10);
    },
    async listKeys(clientId: string): Promise<KeyRecord[]> {
      return [...keys.values()].filter((k) => k.clientId === clientId).sort((a, b) => a.createdAt - b.createdAt);
    },
    async close(): Promise<void> {},
  };
}

/** memoryQuota is the store's monthly quota: units reserved, renewed, committed and released per client-month. */
function memoryQuota(): Pick<Store, "reserve" | "renew" | "commit" | "release" | "usage"> {
  // Per client-month: each held unit's state, a lease deadline (ms, pending) or its place
  // (committed), as the Redis store keeps them in one sorted set.
  const counters = new Map<string, { units: Map<string, Unit>; committed: number; expiresAt: number }>();

  const counterKey = (clientId: string, period: QuotaPeriod) => `${clientId}\u0000${period.id}`;
  const counter = (clientId: string, period: QuotaPeriod) => {
    const now = Date.now();
    // Counters expire after their month, as the Redis ones do (lazy sweep, cheap: one entry per client-month).
    for (const [k, c] of counters) if (c.expiresAt <= now / 1000) counters.delete(k);
    const k = counterKey(clientId, period);
    let c = counters.get(k);
    if (!c) {
      c = { units: new Map(), committed: 0, expiresAt: period.resetsAt + COUNTER_GRACE_SECONDS };
      counters.set(k, c);
    }
    // Lapsed leases are dropped by the store itself, as the Redis scripts do.
    for (const [id, u] of c.units) if (u.pendingUntil !== undefined && u.pendingUntil <= now) c.units.delete(id);
    return c;
  };
  return {
    async reserve(clientId: string, period: QuotaPeriod, limit: number, reservationId: string, leaseMs: number): Promise<Reservation> {
      const c = counter(clientId, period);
      const u = c.units.get(reservationId);
      if (u) {
        if (u.pendingUntil !== undefined) u.pendingUntil = Date.now() + leaseMs;
        return { granted: true, used: c.units.size };
      }
      if (c.units.size >= limit) return { granted: false, used: c.units.size };
      c.units.set(reservationId, { pendingUntil: Date.now() + leaseMs });
      return { granted: true, used: c.units.size };
    },
    async renew(clientId: string, period: QuotaPeriod, reservationId: string, leaseMs: number): Promise<boolean> {
      const u = counter(clientId, period).units.get(reservationId);
      if (u?.pendingUntil === undefined) return false;
      u.pendingUntil = Date.now() + leaseMs;
      return true;
    },
    async commit(clientId: string, period: QuotaPeriod, limit: number, reservationId: string): Promise<Commit> {
      const c = counter(clientId, period);
      let u = c.units.get(reservationId);
      if (u?.place !== undefined) return { committed: true, place: u.place, used: c.units.size };
      if (!u) {
        if (c.units.size >= limit) return { committed: false, place: 0, used: c.units.size };
        u = {};
        c.units.set(reservationId, u);
      }
      u.pendingUntil = undefined;
      u.place = ++c.committed;
      return { committed: true, place: u.place, used: c.units.size };
    },
    async release(clientId: string, period: QuotaPeriod, reservationId: string, options: ReleaseOptions = {}): Promise<number> {
      const c = counter(clientId, period);
      if (options.evenCommitted || c.units.get(reservationId)?.pendingUntil !== undefined) c.units.delete(reservationId);
      return c.units.size;
    },
    async usage(clientId: string, period: QuotaPeriod): Promise<number> {
      if (!counters.has(counterKey(clientId, period))) return 0;
      return counter(clientId, period).units.size;
    },
  };
}

/** memoryRateGate is the store's per-client rate (GCRA) and concurrency, and the plans' rate limits. */
function memoryRateGate(): Pick<Store, "admit" | "renewInFlight" | "leave" | "setPlanRateLimit" | "getPlanRateLimit"> {
  // Per client: GCRA's theoretical arrival time (ms) and the places in flight (lease deadlines, ms).
  const rates = new Map<string, number>();
  const inFlight = new Map<string, Map<string, number>>();
  const planRateLimits = new Map<string, RateLimit>();
  const placesOf = (clientId: string) => {
    const now = Date.now();
    let places = inFlight.get(clientId);
    if (!places) {
      places = new Map();
      inFlight.set(clientId, places);
    }
    for (const [id, until] of places) if (until <= now) places.delete(id);
    return places;
  };

  return {
    async admit(clientId: string, limit: RateLimit, requestId: string, leaseMs: number): Promise<RateDecision> {
      const now = Date.now();
      const places = placesOf(clientId);
      // A swept client (nothing in flight, its burst whole) costs no memory.
      let tat = rates.get(clientId);
      if (tat !== undefined && tat <= now && places.size === 0) {
        rates.delete(clientId);
        tat = undefined;
      }
      const step = gcra(tat, now, limit);
      // The rate as it stands, before this request: what a request that takes nothing reports.
      const asItStands = { remaining: step.available, resetMs: step.resetBeforeMs, retryAfterMs: 0 };
      if (places.has(requestId)) {
        // Admitted before: renewed, and nothing taken twice.
        places.set(requestId, now + leaseMs);
        return { granted: true, ...asItStands, inFlight: places.size };
      }
      if (!step.granted) {
        return {
          granted: false,
          limitedBy: "rate",
          remaining: 0,
          resetMs: step.resetMs,
          retryAfterMs: step.retryAfterMs,
          inFlight: places.size,
        };
      }
      if (places.size >= limit.concurrency) {
        return { granted: false, limitedBy: "concurrency", ...asItStands, inFlight: places.size };
      }
      rates.set(clientId, step.tat);
      places.set(requestId, now + leaseMs);
      return { granted: true, remaining: step.remaining, resetMs: step.resetMs, retryAfterMs: 0, inFlight: places.size };
    },
    async renewInFlight(clientId: string, requestId: string, leaseMs: number): Promise<boolean> {
      const places = placesOf(clientId);
      if (!places.has(requestId)) return false;
      places.set(requestId, Date.now() + leaseMs);
      return true;
    },
    async leave(clientId: string, requestId: string): Promise<number> {
      const places = placesOf(clientId);
      places.delete(requestId);
      if (places.size === 0) inFlight.delete(clientId);
      return places.size;
    },
    async setPlanRateLimit(plan: string, limit: RateLimit): Promise<void> {
      planRateLimits.set(plan, { rate: limit.rate, burst: limit.burst, concurrency: limit.concurrency });
    },
    async getPlanRateLimit(plan: string): Promise<RateLimit | undefined> {
      return planRateLimits.get(plan);
    },
  };
}

/** Unit is one held quota unit: pending (a lease deadline, ms) or committed (its place). */
interface Unit {
  pendingUntil?: number;
  place?: number;
}

/**
 * COUNTER_GRACE_SECONDS: a month's counter is kept 7 days after the month ends (so `palmctl usage`
 * and late refunds of requests that straddled midnight still find it), then expires.
 */
export const COUNTER_GRACE_SECONDS = 7 * 24 * 3600;
