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

/** UsageSnapshot is the client's quota after this request's reservation. */
export interface UsageSnapshot {
  /** Requests counted this period, including this one. */
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

/** kUsage: set by the quota interceptor after a successful reservation. */
export const kUsage = createContextKey<UsageSnapshot | undefined>(undefined, { description: "usage" });
