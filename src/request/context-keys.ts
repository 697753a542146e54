/**
 * Per-request values shared between interceptors and the service (Connect context values).
 */
import { type ConnectError, type ContextValues, createContextKey } from "@connectrpc/connect";
import type { Logger } from "../log.js";
import type { Protocol } from "../wire/http.js";

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
  readonly place: number;
  /** The plan's monthly limit. */
  readonly limit: number;
  readonly plan: string;
  /** Unix seconds: start of the next period. */
  readonly resetsAt: number;
}

/** kRequestId: the request id (`palm_` + ULID), set when the request arrives (or by the outcome interceptor in process). */
export const kRequestId = createContextKey<string | undefined>(undefined, { description: "request id" });

/**
 * Exchange is one request and its answer as the access log sees them (src/server/access-log.ts):
 * begun when the request arrives, written as one log line and one count when its response closes.
 */
export interface Exchange {
  readonly requestId: string;
  /** A child logger carrying the request id: whatever is logged about this request goes through it. */
  readonly logger: Logger;
  /** Aborted (with `canceled`) when the client goes away before its answer is complete. */
  readonly signal: AbortSignal;
  /** The context values the request's RPC runs with: request id, exchange, principal. */
  readonly contextValues: ContextValues;
  /** The caller's protocol, once the door has seen the request; undefined for the site's own paths. */
  protocol: Protocol | undefined;
  /** The RPC ("palm.v1.PalmService/Analyze"), once routed. */
  procedure: string | undefined;
  /** The answer's error, once noted; undefined while the answer is a success. */
  readonly error: ConnectError | undefined;
  /** fail normalises `e` to the error table, puts the request id in its metadata, notes it as the answer's error and returns it. */
  fail(e: unknown): ConnectError;
}

/** kExchange: the request's {@link Exchange}, on the network (absent on in-process transports). */
export const kExchange = createContextKey<Exchange | undefined>(undefined, { description: "exchange" });

/** kPrincipal: set by the API key interceptor once a key is recognised. */
export const kPrincipal = createContextKey<Principal | undefined>(undefined, { description: "principal" });

/**
 * QuotaTicket is one request's quota unit, handed by the quota interceptor to the service
 * (src/auth/quota-ticket.ts): the service reserves it once admission control accepted the work
 * ({@link QuotaTicket.reserve}) and commits it just before it shapes its 200
 * ({@link QuotaTicket.commit}). Anything else releases it.
 */
export interface QuotaTicket {
  /** reserve holds one pending unit (idempotent); throws quota_exceeded or store_unavailable. */
  reserve(): Promise<void>;
  /** commit reserves if needed, then commits the unit and returns its place (idempotent). */
  commit(): Promise<UsageSnapshot>;
}

/** kQuota: set by the quota interceptor for calls with a recognised key. */
export const kQuota = createContextKey<QuotaTicket | undefined>(undefined, { description: "quota" });
