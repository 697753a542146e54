/**
 * The REST surface of SPEC.md, served from the Node adapter's `fallback`. Routes come from the
 * `google.api.http` annotations (rest-routes.ts); each REST call runs through an in-process
 * Connect client (`createRouterTransport`) with the SAME interceptors as gRPC and Connect, so key
 * checks, quota and error mapping exist once. Two REST-only interceptors wrap them: the first
 * hands the REST request's id and protocol to the chain; the innermost reads and decodes the body
 * — only after the key and quota checks passed.
 */
import { randomUUID } from "node:crypto";
import http2 from "node:http2";
import { availableParallelism } from "node:os";
import { create, type DescMessage, type DescService, type MessageShape } from "@bufbuild/protobuf";
import {
  ConnectError,
  createContextKey,
  createRouterTransport,
  type ConnectRouter,
  type Interceptor,
} from "@connectrpc/connect";
import type { ConnectNodeAdapterOptions } from "@connectrpc/connect-node";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { kProtocol, kRequestId } from "../auth/context-keys.js";
import { httpStatusOf, palmError, reasonOf, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import { newRequestId, REQUEST_ID_HEADER } from "../server/request-id.js";
import { isJsonContentType, MAX_BODY_BYTES, readRequestBody } from "./rest-body.js";
import { createRestCodec } from "./rest-codec.js";
import { createRestTable, restRoutesOf, type RestRoute } from "./rest-routes.js";

/** NodeHandlerFn is a Node (HTTP/1.1 or HTTP/2 compat) request handler, as the adapter's fallback. */
export type NodeHandlerFn = NonNullable<ConnectNodeAdapterOptions["fallback"]>;
type NodeRequest = Parameters<NodeHandlerFn>[0];
type NodeResponse = Parameters<NodeHandlerFn>[1];

/** RestHandlerOptions configure {@link createRestHandler}. */
export interface RestHandlerOptions {
  /** Services whose annotated methods get REST paths. */
  services: readonly DescService[];
  /** The same routes the server registers. */
  routes: (router: ConnectRouter) => void;
  /** The same interceptors the server uses, in the same order. */
  interceptors: readonly Interceptor[];
  /** Body limit in bytes. Default 8 MiB (SPEC.md section 2). */
  bodyLimitBytes?: number;
  /** Deadline for receiving a body, ms. */
  bodyTimeoutMs: number;
  /**
   * Worker threads decoding large JSON bodies and encoding responses with image bytes, off the
   * event loop (rest-codec.ts); 0 does it inline. Default: a quarter of the CPUs, 1 to 4.
   */
  codecThreads?: number;
  logger: Logger;
}

/** A REST call's hand-over to the in-process chain. */
interface RestCall {
  readonly requestId: string;
  readonly readBody?: () => Promise<unknown>;
}

/** kRestBody: reads and decodes the REST body into the request message (innermost interceptor). */
const kRestBody = createContextKey<(() => Promise<unknown>) | undefined>(undefined, { description: "REST body" });

/** The in-process call is matched to its REST request by a random per-call token header. */
const REST_CALL_HEADER = "x-palm-rest-call";

/** Response headers copied from the RPC to REST: ours (x-…), Retry-After and Allow. */
const isForwardedHeader = (name: string) => name.startsWith("x-") || name === "retry-after" || name === "allow";

/** Request headers never forwarded into the in-process call (hop-by-hop, protocol, pseudo). */
const DROPPED_REQUEST_HEADERS = /^(:|host$|connection$|keep-alive$|transfer-encoding$|te$|upgrade$|content-|accept-encoding$|connect-|grpc-|x-palm-)/;

/** RestHandler is the fallback handler plus the paths it serves. */
export type RestHandler = NodeHandlerFn & {
  /** Whether `path` (without query) is a REST path. */
  hasPath(path: string): boolean;
  /** close stops the codec workers (after the server stopped serving). */
  close(): Promise<void>;
};

/**
 * createRestHandler returns the `fallback` handler serving the annotated REST paths (and the
 * 404/405 answers for every other path: a gRPC client gets them as a gRPC status).
 */
export function createRestHandler(options: RestHandlerOptions): RestHandler {
  const table = createRestTable(restRoutesOf(options.services));
  const bodyLimit = options.bodyLimitBytes ?? MAX_BODY_BYTES;
  const calls = new Map<string, RestCall>();
  const codec = createRestCodec({
    threads: options.codecThreads ?? Math.max(1, Math.min(4, Math.floor(availableParallelism() / 4))),
  });

  const restContext: Interceptor = (next) => async (req) => {
    const token = req.header.get(REST_CALL_HEADER);
    const call = token === null ? undefined : calls.get(token);
    if (call) {
      req.contextValues.set(kRequestId, call.requestId);
      req.contextValues.set(kProtocol, "rest");
      req.contextValues.set(kRestBody, call.readBody);
    }
    return next(req);
  };
  const restBody: Interceptor = (next) => async (req) => {
    const read = req.contextValues.get(kRestBody);
    if (!read || req.stream) return next(req);
    return next({ ...req, message: (await read()) as typeof req.message });
  };
  const transport = createRouterTransport(options.routes, {
    router: { interceptors: [restContext, ...options.interceptors, restBody] },
  });

  async function serve(req: NodeRequest, res: NodeResponse): Promise<void> {
    const requestId = newRequestId();
    const byMethod = table.get(pathOf(req));
    if (!byMethod) return sendLocalError(req, res, requestId, palmError("not_found"));
    const route = byMethod.get(req.method ?? "");
    if (!route) {
      const allow = [...byMethod.keys()].join(", ");
      return sendLocalError(req, res, requestId, palmError("method_not_allowed", { metadata: { allow } }));
    }

    const abort = new AbortController();
    res.once("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    const token = randomUUID();
    calls.set(token, { requestId, readBody: route.body === "" ? undefined : () => readMessage(req, res, route, abort.signal) });
    const header = new Headers();
    for (const [name, value] of Object.entries(req.headers)) {
      if (DROPPED_REQUEST_HEADERS.test(name) || value === undefined) continue;
      header.set(name, Array.isArray(value) ? value.join(", ") : value);
    }
    header.set(REST_CALL_HEADER, token);
    try {
      const out = await transport.unary(route.method, abort.signal, undefined, header, create(route.method.input), undefined);
      const headers = forwardedHeaders(out.header, out.trailer);
      headers.set(REQUEST_ID_HEADER, requestId);
      const payload = await codec.encode(route.method.output, out.message as MessageShape<DescMessage>);
      send(req, res, 200, headers, payload);
    } catch (e) {
      sendError(req, res, requestId, e);
    } finally {
      calls.delete(token);
    }
  }

  async function readMessage(req: NodeRequest, res: NodeResponse, route: RestRoute, signal: AbortSignal): Promise<unknown> {
    if (!isJsonContentType(req.headers["content-type"])) throw palmError("unsupported_media_type");
    // "Expect: 100-continue" is answered only now, after the key and quota checks passed: a
    // refused client never uploads its body (server.ts defers the automatic 100 for REST paths).
    const expectsContinue = /100-continue/i.test(String(req.headers.expect ?? ""));
    const bytes = await readRequestBody(req, {
      limitBytes: bodyLimit,
      timeoutMs: options.bodyTimeoutMs,
      beforeRead: () => expectsContinue && res.writeContinue(),
      signal,
    });
    return codec.decode(route.method.input, route.body, bytes);
  }

  /** sendLocalError answers 404/405, which no RPC (and so no request interceptor) sees. */
  function sendLocalError(req: NodeRequest, res: NodeResponse, requestId: string, err: ConnectError): void {
    const contentType = String(req.headers["content-type"] ?? "");
    options.logger.info(
      { request_id: requestId, protocol: "rest", method: `${req.method} ${pathOf(req)}`, status: httpStatusOf(err), code: reasonOf(err) },
      "request",
    );
    if ("stream" in req && contentType.startsWith("application/grpc") && !contentType.startsWith("application/grpc-web")) {
      // A gRPC client calling an unknown method: a trailers-only gRPC answer (UNIMPLEMENTED with
      // our ErrorInfo), not an HTTP 404 that grpc-js would report without details.
      const h = setTrailerStatus(new Headers({ "content-type": "application/grpc+proto", [REQUEST_ID_HEADER]: requestId }), err);
      const headers: Record<string, string> = { ":status": "200" };
      h.forEach((v, k) => (headers[k] = v));
      if (!req.stream.headersSent) req.stream.respond(headers, { endStream: true });
      return;
    }
    sendError(req, res, requestId, err);
  }

  function sendError(req: NodeRequest, res: NodeResponse, requestId: string, e: unknown): void {
    let err = ConnectError.from(e);
    if (reasonOf(err) === undefined) err = toPalmError(err);
    const status = httpStatusOf(err);
    const headers = forwardedHeaders(err.metadata);
    headers.set(REQUEST_ID_HEADER, requestId);
    send(req, res, status, headers, errorPayload(reasonOf(err) ?? "internal_error", err.rawMessage, status, requestId));
  }

  const handler: NodeHandlerFn = (req, res) => {
    serve(req, res).catch((e) => {
      // Only a bug in this file can get here; answer 500 generically.
      options.logger.error({ err: e }, "REST handler failed");
      if (!res.headersSent) sendError(req, res, newRequestId(), palmError("internal_error", { cause: e }));
    });
  };
  return Object.assign(handler, { hasPath: (path: string) => table.has(path), close: () => codec.close() });
}

/** errorPayload is SPEC.md's JSON error body, as bytes. */
export function errorPayload(code: string, message: string, status: number, requestId: string): Buffer {
  return Buffer.from(JSON.stringify({ error: { code, message, status, request_id: requestId } }));
}

/** pathOf is a request's path without its query string. */
export function pathOf(req: NodeRequest): string {
  return (req.url ?? "/").split("?", 1)[0];
}

function forwardedHeaders(...sources: Headers[]): Headers {
  const out = new Headers();
  for (const h of sources) h.forEach((value, name) => isForwardedHeader(name) && name !== REST_CALL_HEADER && out.set(name, value));
  return out;
}

/** LINGER: after refusing an unread body, keep discarding for at most 1 s or 1 MiB, then reset. */
const LINGER_MS = 1000;
const LINGER_BYTES = 1024 * 1024;

/**
 * lingerOnClose replaces the immediate close Node does after a `Connection: close` response by a
 * bounded "lingering close" (as nginx does): the client still uploading gets to read the response
 * instead of a connection reset that would discard it (test/integration/rest.spec.ts, 413 cases).
 */
function lingerOnClose(socket: import("node:net").Socket): void {
  socket.destroySoon = function lingeringDestroySoon(this: import("node:net").Socket) {
    this.end();
    let discarded = 0;
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.on("data", (chunk: Buffer) => {
      discarded += chunk.byteLength;
      if (discarded > LINGER_BYTES) this.destroy();
    });
    this.once("close", () => clearTimeout(timer));
  };
}

function send(req: NodeRequest, res: NodeResponse, status: number, headers: Headers, payload: Uint8Array): void {
  if (res.headersSent || res.destroyed) return;
  const h: Record<string, string> = { "content-type": "application/json", "content-length": String(payload.byteLength) };
  headers.forEach((v, k) => (h[k] = v));
  // A body we did not read to the end (401 before the body, 413, ...) is not drained: HTTP/1.1
  // closes the connection, HTTP/2 resets the stream with NO_ERROR after the response (RFC 9113 8.1).
  const unread = !req.complete;
  if (unread && req.httpVersionMajor === 1) {
    h.connection = "close";
    lingerOnClose(req.socket);
  }
  res.writeHead(status, h);
  res.end(payload);
  if (unread && "stream" in req) {
    // An immediate RST_STREAM would make nghttp2 drop the response's queued DATA frames:
    // discard the rest of the upload for a bounded time first, then reset with NO_ERROR.
    const stream = req.stream;
    res.once("finish", () => {
      let discarded = 0;
      const close = () => {
        clearTimeout(timer);
        if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
      };
      const timer = setTimeout(close, LINGER_MS);
      timer.unref();
      req.on("data", (chunk: Buffer) => {
        discarded += chunk.byteLength;
        if (discarded > 8 * LINGER_BYTES) close();
      });
      req.resume();
    });
  }
}
