/**
 * Per-request values shared between interceptors and the service (Connect context values).
 */
import { createContextKey } from "@connectrpc/connect";

/** Principal is who a recognised key belongs to. */
export interface Principal {
  readonly clientId: string;
  readonly plan: string;
  /** SHA-256 hex of the key (never the key itself). */
  readonly keyHash: string;
  /** Redacted key for logs: `palm_live_…` + last 4. */
  readonly keyHint: string;
}

/** UsageSnapshot is the client's quota once this request's unit is committed. */
export interface UsageSnapshot {
  /** This request's place among the period's committed requests (distinct across all 200s). */
  readonly used: number;
  /** The plan's monthly limit. */
  readonly limit: number;
  readonly plan: string;
  /** Unix seconds: start of the next period. */
  readonly resetsAt: number;
}

/** kRequestId: the request id (`palm_` + ULID), set by the request interceptor or the REST layer. */
export const kRequestId = createContextKey<string | undefined>(undefined, { description: "request id" });

/** kProtocol: the wire protocol for logs ("grpc", "grpc-web", "connect", "rest"). */
export const kProtocol = createContextKey<string | undefined>(undefined, { description: "protocol" });

/** kPrincipal: set by the API key interceptor once a key is recognised. */
export const kPrincipal = createContextKey<Principal | undefined>(undefined, { description: "principal" });

/**
 * QuotaTicket is one request's quota unit, handed by the quota interceptor to the service: the
 * service reserves it once admission control accepted the work ({@link QuotaTicket.reserve}) and
 * commits it when the answer is a 200 ({@link QuotaTicket.commit}). Anything else releases it.
 */
export interface QuotaTicket {
  /** reserve holds one pending unit (idempotent); throws quota_exceeded or store_unavailable. */
  reserve(): Promise<void>;
  /** commit reserves if needed, then commits the unit and returns its place (idempotent). */
  commit(): Promise<UsageSnapshot>;
}

/** kQuota: set by the quota interceptor for calls with a recognised key. */
export const kQuota = createContextKey<QuotaTicket | undefined>(undefined, { description: "quota" });
