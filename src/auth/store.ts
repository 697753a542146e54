/**
 * The key and quota store interface; implemented by {@link createMemoryStore} (embedded default)
 * and {@link createRedisStore} (shared by replicas). test/helpers/store-suite.ts runs the same
 * suite against both.
 */
import type { QuotaPeriod } from "./quota-period.js";
import type { RateDecision, RateLimit } from "./rate-limit.js";

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
  /** Units held after the call, committed and pending (including this one when granted). */
  readonly used: number;
}

/** Commit is the answer of {@link Store.commit}. */
export interface Commit {
  /**
   * Whether the unit is committed. False only when its pending lease had lapsed and the limit
   * was reached meanwhile by others: then nothing changed.
   */
  readonly committed: boolean;
  /** This request's place among the period's committed units (1-based); 0 when not committed. */
  readonly place: number;
  /** Units held after the call, committed and pending. */
  readonly used: number;
}

/**
 * Store keeps keys, clients and monthly counters. Every method may throw StoreUnavailableError.
 *
 * Quota units are held in two states. A unit is *pending* from {@link Store.reserve} until
 * {@link Store.commit} (the request's 200) or {@link Store.release} (any other outcome); a
 * pending unit carries a lease deadline that the replica serving the request renews
 * ({@link Store.renew}). A pending unit whose lease has passed is dropped by the store itself on
 * its next reserve, commit or usage for that client and period, so a unit held by a replica that
 * died is given back without that replica (test/integration/quota-leases.spec.ts). Committed
 * units are never given back. The count against the limit is committed + live pending.
 */
/** ReleaseOptions tune {@link Store.release}. */
export interface ReleaseOptions {
  /**
   * Drop the unit even if it is committed: for a request whose commit was sent but whose answer
   * was lost, so that it may have committed although no 200 was sent. Default false.
   */
  evenCommitted?: boolean;
}

export interface Store {
  /** findKey resolves a key hash to its owner; undefined when unknown or revoked. */
  findKey(keyHash: string): Promise<KeyOwner | undefined>;
  /**
   * reserve atomically adds the pending unit `reservationId` (unique per request) for the client
   * and `period`, with a lease of `leaseMs`, unless `limit` is already reached. Idempotent: the
   * same id never counts twice (a second call renews its lease).
   */
  reserve(clientId: string, period: QuotaPeriod, limit: number, reservationId: string, leaseMs: number): Promise<Reservation>;
  /** renew extends a pending unit's lease to `leaseMs` from now; false when it is not pending (any more). */
  renew(clientId: string, period: QuotaPeriod, reservationId: string, leaseMs: number): Promise<boolean>;
  /**
   * commit turns the pending unit `reservationId` into a committed one and returns its place.
   * Idempotent (the same place again). A unit whose lease lapsed is committed only while the
   * count is under `limit`.
   */
  commit(clientId: string, period: QuotaPeriod, limit: number, reservationId: string): Promise<Commit>;
  /**
   * release atomically drops the pending unit `reservationId` and returns the units held after.
   * Idempotent, and a no-op for a unit that was never reserved or is committed: a release sent
   * after a reserve whose answer was lost (timeout) is always safe.
   */
  release(clientId: string, period: QuotaPeriod, reservationId: string, options?: ReleaseOptions): Promise<number>;
  /** usage returns the client's units held for `period`: committed plus live pending. */
  usage(clientId: string, period: QuotaPeriod): Promise<number>;
  /**
   * admit atomically applies the client's per-client limits (rate-limit.ts) to the request
   * `requestId`: granted only when both the rate and the places in flight allow it, and then it
   * holds a place in flight with a lease of `leaseMs`; refused, nothing changes. Places whose
   * lease has passed are dropped first (a replica that died gives its places back).
   */
  admit(clientId: string, limit: RateLimit, requestId: string, leaseMs: number): Promise<RateDecision>;
  /** renewInFlight extends a held place's lease to `leaseMs` from now; false when it is not held. */
  renewInFlight(clientId: string, requestId: string, leaseMs: number): Promise<boolean>;
  /** leave drops the place in flight of `requestId` (idempotent) and returns the places held after. */
  leave(clientId: string, requestId: string): Promise<number>;
  /** setPlanRateLimit stores `limit` for `plan`, overriding the configured default (palmctl). */
  setPlanRateLimit(plan: string, limit: RateLimit): Promise<void>;
  /** getPlanRateLimit returns the stored limit of `plan`, or undefined when it has none. */
  getPlanRateLimit(plan: string): Promise<RateLimit | undefined>;
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
