/**
 * The door: every API request on the port, whatever its protocol (gRPC, gRPC-Web, Connect unary
 * and streaming, REST), is routed and admitted here from its headers alone, before a byte of its
 * body is read or decompressed. Unknown paths (404) and methods (405), a missing, malformed,
 * unknown or revoked key (401), a plan missing from the configuration (500) and a store that
 * cannot answer (503) are answered in the caller's wire format without reading the body; a
 * client that goes away while its key is checked is noticed at once (499 in the log). Refusals
 * pass through the outer interceptors (metrics, request id and log), so they are counted and
 * logged like any other answer. An admitted request goes on, with its request id, protocol and
 * principal as context values, to connect's handler (RPC) or to the REST handler, where the
 * whole interceptor chain runs around the service. test/integration/door.spec.ts pins it.
 */
import { create, type DescMethod } from "@bufbuild/protobuf";
import { type ConnectError, createContextValues, type ContextValues, type Interceptor } from "@connectrpc/connect";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { codeToHttpStatus, endStreamFlag, endStreamToJson, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { encodeEnvelope } from "@connectrpc/connect/protocol";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { kPrincipal, kProtocol, kRequestId, type Principal } from "../api/context-keys.js";
import { httpStatusOf, palmError, reasonOf, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import {
  pathOf,
  rpcWireProtocolOf,
  webHeaders,
  type NodeHandlerFn,
  type NodeRequest,
  type NodeResponse,
  type WireProtocol,
} from "../api/http.js";
import { restErrorAnswer } from "../rest/rest-handler.js";
import type { RestRoute, RestTable } from "../rest/rest-routes.js";
import { newRequestId, REQUEST_ID_HEADER } from "../api/request-id.js";
import { respond, type Answer } from "./respond.js";

/** DoorCall is what the door hands on with an admitted request. */
export interface DoorCall {
  /** Request id, protocol and (keyed methods) principal. */
  readonly contextValues: ContextValues;
  /** Aborted when the client goes away (its socket or stream closed before the answer). */
  readonly signal: AbortSignal;
  /**
   * record passes an error found outside the interceptor chain (a message connect could not
   * read) through the outer interceptors: it is logged and counted, and comes back normalised
   * to the error table with the request id in its metadata.
   */
  record(err: unknown): Promise<ConnectError>;
}

/** DoorOptions configure {@link createDoor}. */
export interface DoorOptions {
  /** connect's handlers by request path ("/palm.v1.PalmService/Analyze"). */
  rpc: ReadonlyMap<string, UniversalHandler>;
  /** REST routes by path and HTTP method. */
  rest: RestTable;
  /** Methods that need no key. */
  publicMethods: readonly DescMethod[];
  /** admit resolves the principal from the headers (key and plan); throws our errors. */
  admit(header: Headers): Promise<Principal>;
  /** admitted is told of each request admitted with a key, before it goes on. */
  admitted(req: NodeRequest): void;
  /** The outer interceptors (metrics, request id/log/errors), which refusals pass through too. */
  outer: readonly Interceptor[];
  logger: Logger;
  /** serveRpc continues an admitted RPC into connect's handler. */
  serveRpc(req: NodeRequest, res: NodeResponse, handler: UniversalHandler, call: DoorCall): void;
  /** serveRest continues an admitted REST call. */
  serveRest(req: NodeRequest, res: NodeResponse, route: RestRoute, call: DoorCall): void;
}

type AnyFn = Parameters<Interceptor>[0];

/** createDoor returns the node handler of every API path. */
export function createDoor(options: DoorOptions): NodeHandlerFn {
  return new Door(options).handle;
}

/** Door routes and admits every API request from its headers (see the file's comment). */
class Door {
  readonly #options: DoorOptions;
  readonly #publicMethods: ReadonlySet<DescMethod>;

  constructor(options: DoorOptions) {
    this.#options = options;
    this.#publicMethods = new Set(options.publicMethods);
  }

  /** handle is the node handler: RPC paths, then REST routes, else 404/405. */
  readonly handle: NodeHandlerFn = (req, res) => {
    const path = pathOf(req);
    const handler = this.#options.rpc.get(path);
    if (handler) return this.#rpc(req, res, handler);
    const byMethod = this.#options.rest.get(path);
    const route = byMethod?.get(req.method ?? "");
    if (!byMethod || !route) {
      const allow = byMethod ? [...byMethod.keys()].join(", ") : undefined;
      return this.#refuseRoute(
        req,
        res,
        allow === undefined ? palmError("not_found") : palmError("method_not_allowed", { metadata: { allow } }),
      );
    }
    void this.#enter(req, res, route.method, "rest", (call) => this.#options.serveRest(req, res, route, call)).catch((e) =>
      this.#fault(req, res, e),
    );
  };

  #rpc(req: NodeRequest, res: NodeResponse, handler: UniversalHandler): void {
    const contentType = String(req.headers["content-type"] ?? "");
    // What connect refuses by itself without reading the body (a method or content type it
    // does not serve: 405, 415; bidi streams over HTTP/1.1) stays its own answer.
    if (!handler.allowedMethods.includes(req.method ?? "") || !handler.supportedContentType(contentType)) {
      this.#options.serveRpc(req, res, handler, this.#call(req, res, handler.method, createContextValues()));
      return;
    }
    void this.#enter(req, res, handler.method, rpcWireProtocolOf(contentType), (call) => {
      // "Expect: 100-continue" only once admitted: a refused client never sends its body (door.spec.ts).
      if (/100-continue/i.test(String(req.headers.expect ?? ""))) res.writeContinue();
      this.#options.serveRpc(req, res, handler, call);
    }).catch((e) => this.#fault(req, res, e));
  }

  /** #call is the {@link DoorCall} of a request: a new request id in `values`, the close signal. */
  #call(req: NodeRequest, res: NodeResponse, method: DescMethod, values: ContextValues): DoorCall {
    values.set(kRequestId, newRequestId());
    const signal = closeSignal(res);
    return { contextValues: values, signal, record: (err) => this.#record(req, method, values, signal, err) };
  }

  /**
   * #enter admits a request: public methods at once, keyed ones once their key is recognised.
   * A refusal is answered here; a client gone meanwhile is logged as canceled and answered nothing.
   */
  async #enter(
    req: NodeRequest,
    res: NodeResponse,
    method: DescMethod,
    protocol: WireProtocol,
    go: (call: DoorCall) => void,
  ): Promise<void> {
    const values = createContextValues();
    values.set(kProtocol, protocol === "connect-stream" ? "connect" : protocol);
    const call = this.#call(req, res, method, values);
    if (this.#publicMethods.has(method)) return go(call);
    let refusal: unknown;
    try {
      values.set(kPrincipal, await untilAborted(this.#options.admit(webHeaders(req)), call.signal));
    } catch (e) {
      refusal = call.signal.aborted ? palmError("canceled") : e;
    }
    if (refusal === undefined) {
      this.#options.admitted(req);
      return go(call);
    }
    const err = await call.record(refusal);
    if (!call.signal.aborted) respond(req, res, answerOf(protocol, err, String(req.headers["content-type"] ?? "")));
  }

  /** #record runs the outer interceptors around a call that ends in `err`: log line, metrics, request id. */
  async #record(req: NodeRequest, method: DescMethod, values: ContextValues, signal: AbortSignal, err: unknown): Promise<ConnectError> {
    let next: AnyFn = async () => {
      throw err;
    };
    for (const i of [...this.#options.outer].reverse()) next = i(next);
    const common = {
      service: method.parent,
      method,
      requestMethod: req.method ?? "POST",
      url: req.url ?? "/",
      signal,
      header: webHeaders(req),
      contextValues: values,
    };
    try {
      if (method.methodKind === "unary") {
        await next({ ...common, stream: false, message: create(method.input) } as Parameters<AnyFn>[0]);
      } else {
        await next({ ...common, stream: true, message: (async function* () {})() } as Parameters<AnyFn>[0]);
      }
    } catch (e) {
      return toPalmError(e);
    }
    return toPalmError(err); // the outer interceptors never swallow an error
  }

  /**
   * #refuseRoute answers an unknown path (404) or method (405), which no RPC (and so no
   * interceptor) sees: a gRPC client gets a trailers-only UNIMPLEMENTED with our ErrorInfo, every
   * other client the REST error body (Connect and gRPC-Web clients read it as unimplemented).
   */
  #refuseRoute(req: NodeRequest, res: NodeResponse, err: ConnectError): void {
    const requestId = newRequestId();
    err.metadata.set(REQUEST_ID_HEADER, requestId);
    const contentType = String(req.headers["content-type"] ?? "");
    this.#options.logger.info(
      { request_id: requestId, protocol: "rest", method: `${req.method} ${pathOf(req)}`, status: httpStatusOf(err), code: reasonOf(err) },
      "request",
    );
    const grpc = "stream" in req && rpcWireProtocolOf(contentType) === "grpc";
    respond(req, res, answerOf(grpc ? "grpc" : "rest", err, contentType));
  }

  /** #fault: only a bug in this file can get here; answer 500 generically. */
  #fault(req: NodeRequest, res: NodeResponse, e: unknown): void {
    this.#options.logger.error({ err: e }, "door failed");
    const err = palmError("internal_error", { cause: e });
    err.metadata.set(REQUEST_ID_HEADER, newRequestId());
    respond(req, res, answerOf("rest", err, ""));
  }
}

/** answerOf writes `err` (normalised, request id in its metadata) in `protocol`'s wire format. */
export function answerOf(protocol: WireProtocol, err: ConnectError, contentType: string): Answer {
  switch (protocol) {
    case "grpc":
    case "grpc-web": {
      // Trailers-only: the status and its details in the only HEADERS frame.
      const headers = new Headers({ "content-type": contentType.startsWith("application/grpc") ? contentType : "application/grpc+proto" });
      setTrailerStatus(headers, err); // with the error's metadata
      return { status: 200, headers, body: new Uint8Array(0) };
    }
    case "connect": {
      const headers = new Headers(err.metadata);
      headers.set("content-type", "application/json");
      return { status: codeToHttpStatus(err.code), headers, body: errorToJsonBytes(err, {}) };
    }
    case "connect-stream": {
      // The end-stream message carries the error and its metadata; the request id is a header too.
      const headers = new Headers({ "content-type": contentType });
      const id = err.metadata.get(REQUEST_ID_HEADER);
      if (id !== null) headers.set(REQUEST_ID_HEADER, id);
      const json = new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), err, {}))); // the error's metadata goes in once, from err
      return { status: 200, headers, body: encodeEnvelope(endStreamFlag, json) };
    }
    case "rest":
      return restErrorAnswer(err);
  }
}

/**
 * closeSignal is aborted when the response closes before the server ended it: the client went
 * away (on HTTP/2 a reset stream also "finishes" the response, hence writableEnded;
 * test/integration/door.spec.ts, "a client that leaves").
 */
export function closeSignal(res: NodeResponse): AbortSignal {
  const controller = new AbortController();
  res.once("close", () => {
    if (!res.writableEnded) controller.abort(palmError("canceled"));
  });
  return controller.signal;
}

/** untilAborted settles with `p`, or rejects as soon as `signal` aborts (`p` is left to settle unobserved). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
