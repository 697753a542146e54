/**
 * Node request and response types shared by every HTTP-facing layer, and the small helpers
 * they all need: the path of a request, its headers as a Headers object, its RPC protocol name
 * and SPEC.md's JSON error body.
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

/** rpcWireProtocolOf tells an RPC request's wire protocol from its content type. */
export function rpcWireProtocolOf(contentType: string): Exclude<WireProtocol, "rest"> {
  const ct = contentType.toLowerCase();
  if (ct.startsWith("application/grpc-web")) return "grpc-web";
  if (ct.startsWith("application/grpc")) return "grpc";
  if (ct.startsWith("application/connect+")) return "connect-stream";
  return "connect";
}

/** protocolOf names an RPC's wire protocol for logs and metrics (Connect unary and streaming alike "connect"). */
export function protocolOf(header: Headers): string {
  const protocol = rpcWireProtocolOf(header.get("content-type") ?? "");
  return protocol === "connect-stream" ? "connect" : protocol;
}

/** errorPayload is SPEC.md's JSON error body, as bytes. */
export function errorPayload(code: string, message: string, status: number, requestId: string): Buffer {
  return Buffer.from(JSON.stringify({ error: { code, message, status, request_id: requestId } }));
}
