/**
 * Node request and response types shared by every HTTP-facing layer, and the small helpers
 * they all need: the path of a request, its headers as a Headers object and its wire protocol.
 */
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";

/** NodeHandlerFn is a Node (HTTP/1.1 or HTTP/2 compat) request handler. */
export type NodeHandlerFn = NonNullable<ConnectNodeAdapterOptions["fallback"]>;
export type NodeRequest = Parameters<NodeHandlerFn>[0];
export type NodeResponse = Parameters<NodeHandlerFn>[1];

/** pathOf is a request's path without its query string. */
export function pathOf(req: NodeRequest): string {
  return (req.url ?? "/").split("?", 1)[0];
}

/** declaredLength is the body length a request's Content-Length declares, or undefined where it declares none readable. */
export function declaredLength(req: NodeRequest): number | undefined {
  const declared = Number(req.headers["content-length"]);
  return Number.isFinite(declared) && declared >= 0 ? declared : undefined;
}

/** webHeaders is a request's headers as a Headers object (HTTP/2 pseudo-headers left out). */
export function webHeaders(req: NodeRequest): Headers {
  const h = new Headers();
  for (const [name, value] of Object.entries(req.headers)) {
    if (value === undefined || name.startsWith(":")) continue;
    h.set(name, Array.isArray(value) ? value.join(", ") : value);
  }
  return h;
}

/** WireProtocol is how a request's answer must be written. */
export type WireProtocol = "grpc" | "grpc-web" | "connect" | "connect-stream" | "rest";

/** Protocol names a caller's protocol in logs and metrics: Connect unary and streaming alike "connect". */
export type Protocol = "grpc" | "grpc-web" | "connect" | "rest";

/**
 * wireProtocolOf tells a request's wire protocol from its headers, the one place it is classified.
 * On an RPC path every content type is an RPC protocol (Connect unary may be `application/json`);
 * elsewhere a request is REST unless its content type or `connect-protocol-version` says otherwise.
 */
export function wireProtocolOf(contentType: string, rpcPath: boolean, connectHeader = false): WireProtocol {
  const ct = contentType.toLowerCase();
  if (ct.startsWith("application/grpc-web")) return "grpc-web";
  if (ct.startsWith("application/grpc")) return "grpc";
  if (ct.startsWith("application/connect+")) return "connect-stream";
  return rpcPath || connectHeader ? "connect" : "rest";
}

/** protocolOf names a wire protocol for logs and metrics. */
export function protocolOf(wire: WireProtocol): Protocol {
  return wire === "connect-stream" ? "connect" : wire;
}

/** isEnveloped tells the wire protocols whose body is a sequence of length-prefixed messages. */
export function isEnveloped(wire: WireProtocol): boolean {
  return wire === "grpc" || wire === "grpc-web" || wire === "connect-stream";
}
