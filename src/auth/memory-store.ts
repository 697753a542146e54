/**
 * The embedded in-memory store: the default when REDIS_URL is unset. A real implementation of
 * {@link Store} for one process (quota is exact within the process; nothing is persisted).
 */
import type { ClientRecord, KeyOwner, KeyRecord, Reservation, Store } from "./store.js";
import type { QuotaPeriod } from "./quota-period.js";

/** createMemoryStore returns an empty in-memory {@link Store}. */
export function createMemoryStore(): Store {
  const keys = new Map<string, KeyRecord>();
  const clients = new Map<string, ClientRecord>();
  const counters = new Map<string, { ids: Set<string>; expiresAt: number }>();

  const counterKey = (clientId: string, period: QuotaPeriod) => `${clientId}\u0000${period.id}`;
  const counter = (clientId: string, period: QuotaPeriod) => {
    const now = Date.now() / 1000;
    // Counters expire after their month, as the Redis ones do (lazy sweep, cheap: one entry per client-month).
    for (const [k, c] of counters) if (c.expiresAt <= now) counters.delete(k);
    const k = counterKey(clientId, period);
    let c = counters.get(k);
    if (!c) {
      c = { ids: new Set(), expiresAt: period.resetsAt + COUNTER_GRACE_SECONDS };
      counters.set(k, c);
    }
    return c;
  };

  return {
    async findKey(keyHash: string): Promise<KeyOwner | undefined> {
      const k = keys.get(keyHash);
      if (!k || k.revokedAt !== undefined) return undefined;
      const c = clients.get(k.clientId);
      return c ? { clientId: c.clientId, plan: c.plan } : undefined;
    },
    async reserve(clientId: string, period: QuotaPeriod, limit: number, reservationId: string): Promise<Reservation> {
      const c = counter(clientId, period);
      if (c.ids.has(reservationId)) return { granted: true, used: c.ids.size };
      if (c.ids.size >= limit) return { granted: false, used: c.ids.size };
      c.ids.add(reservationId);
      return { granted: true, used: c.ids.size };
    },
    async refund(clientId: string, period: QuotaPeriod, reservationId: string): Promise<number> {
      const c = counter(clientId, period);
      c.ids.delete(reservationId);
      return c.ids.size;
    },
    async usage(clientId: string, period: QuotaPeriod): Promise<number> {
      const c = counters.get(counterKey(clientId, period));
      return c && c.expiresAt > Date.now() / 1000 ? c.ids.size : 0;
    },
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

/**
 * COUNTER_GRACE_SECONDS: a month's counter is kept 7 days after the month ends (so `palmctl usage`
 * and late refunds of requests that straddled midnight still find it), then expires.
 */
export const COUNTER_GRACE_SECONDS = 7 * 24 * 3600;
