/**
 * The key and quota store interface; implemented by {@link createMemoryStore} (embedded default)
 * and {@link createRedisStore} (shared by replicas). test/helpers/store-suite.ts runs the same
 * suite against both.
 */
import type { QuotaPeriod } from "./quota-period.js";

/** KeyOwner is what a valid, unrevoked key resolves to. */
export interface KeyOwner {
  readonly clientId: string;
  readonly plan: string;
}

/** KeyRecord describes one stored key (never the key itself). */
export interface KeyRecord {
  /** SHA-256 hex of the key. */
  readonly hash: string;
  readonly clientId: string;
  /** Unix milliseconds. */
  readonly createdAt: number;
  /** Unix milliseconds, when revoked. */
  readonly revokedAt?: number;
}

/** ClientRecord describes one client account. */
export interface ClientRecord {
  readonly clientId: string;
  readonly plan: string;
  /** Unix milliseconds. */
  readonly createdAt: number;
}

/** Reservation is the answer of {@link Store.reserve}. */
export interface Reservation {
  /** Whether one unit was reserved (false: the limit is reached, nothing changed). */
  readonly granted: boolean;
  /** Count after the call (including this reservation when granted). */
  readonly used: number;
}

/** Store keeps keys, clients and monthly counters. Every method may throw StoreUnavailableError. */
export interface Store {
  /** findKey resolves a key hash to its owner; undefined when unknown or revoked. */
  findKey(keyHash: string): Promise<KeyOwner | undefined>;
  /**
   * reserve atomically counts the reservation `reservationId` (unique per request) for the client
   * and `period`, unless `limit` is already reached. Idempotent: the same id never counts twice.
   */
  reserve(clientId: string, period: QuotaPeriod, limit: number, reservationId: string): Promise<Reservation>;
  /**
   * refund atomically removes the reservation `reservationId` and returns the count after.
   * Idempotent, and a no-op for a reservation that was never made: a refund sent after a reserve
   * whose answer was lost (timeout) is always safe (test/integration/quota.spec.ts, Redis hang).
   */
  refund(clientId: string, period: QuotaPeriod, reservationId: string): Promise<number>;
  /** usage returns the client's count for `period`. */
  usage(clientId: string, period: QuotaPeriod): Promise<number>;
  /** createKey stores a key hash for a client, creating the client on `plan` (default "free") if new. */
  createKey(clientId: string, keyHash: string, plan?: string): Promise<KeyRecord>;
  /** setPlan creates or updates a client's plan. */
  setPlan(clientId: string, plan: string): Promise<ClientRecord>;
  /** getClient returns a client, or undefined. */
  getClient(clientId: string): Promise<ClientRecord | undefined>;
  /** revokeKey revokes the key whose hash is `keyHash`; false when there is none. */
  revokeKey(keyHash: string): Promise<boolean>;
  /** findKeyHashes returns the stored hashes starting with `prefix` (at most 10). */
  findKeyHashes(prefix: string): Promise<string[]>;
  /** listKeys returns a client's keys, oldest first. */
  listKeys(clientId: string): Promise<KeyRecord[]>;
  /** close releases connections. */
  close(): Promise<void>;
}
