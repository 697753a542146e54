/**
 * The REST surface of SPEC.md, a peer of the RPC protocols: the server's door routes a REST call
 * (rest-routes.ts, from the `google.api.http` annotations) and checks its key from the headers;
 * this handler then invokes the same service implementation through the same interceptor chain
 * as gRPC and Connect (`invokeUnaryImplementation`), and writes the answer as SPEC.md's JSON
 * straight from the response message. The body is read and decoded by the innermost
 * interceptor, only after the key and quota checks passed; large bodies and answers are decoded
 * and encoded in codec worker threads (rest-codec.ts).
 */
import { availableParallelism } from "node:os";
import { create, type DescMessage, type DescMethod, type MessageShape } from "@bufbuild/protobuf";
import { createHandlerContext, type Interceptor, type MethodImplSpec, type ServiceImplSpec } from "@connectrpc/connect";
import { type Exchange, kPrincipal } from "../request/context-keys.js";
import { type Answer, errorAnswer, restHeaders } from "../wire/error-answer.js";
import { webHeaders, type NodeRequest, type NodeResponse } from "../wire/http.js";
import { MAX_BODY_BYTES } from "../limits.js";
import { invokeUnaryImplementation } from "../wire/private-apis.js";
import { REQUEST_ID_HEADER } from "../request/request-id.js";
import { palmError } from "../errors.js";
import { readRequestBody } from "./rest-body.js";
import { applyQuery } from "./rest-query.js";
import { createRestCodec } from "./rest-codec.js";
import type { RestRoute } from "./rest-routes.js";
import { bodyLimitOf, createMultipartImageReader, restBodyKindOf, uploadMessage } from "./rest-upload.js";

/** RestHandlerOptions configure {@link createRestHandler}. */
export interface RestHandlerOptions {
  /** The service implementations (the same the RPC router serves). */
  services: readonly ServiceImplSpec[];
  /** The same interceptors the RPC router uses, in the same order. */
  interceptors: readonly Interceptor[];
  /** Body limit in bytes. Default 8 MiB (SPEC.md section 2). */
  bodyLimitBytes?: number;
  /** Deadline for receiving a body, ms. */
  bodyTimeoutMs: number;
  /** Aborted when the server stops waiting for calls in flight (shutdown). */
  shutdownSignal?: AbortSignal;
  /**
   * Worker threads decoding large JSON bodies and encoding responses with image bytes, off the
   * event loop (rest-codec.ts); 0 does it inline. Default: a quarter of the CPUs, 1 to 4.
   */
  codecThreads?: number;
}

/** RestHandler serves the REST calls the door let in. */
export interface RestHandler {
  /** serve runs one call the door let in through the interceptors and the service; never rejects. */
  serve(req: NodeRequest, res: NodeResponse, route: RestRoute, exchange: Exchange): Promise<Answer>;
  /** close stops the codec workers (after the server stopped serving). */
  close(): Promise<void>;
}

/** createRestHandler returns the REST peer of the RPC protocols. */
export function createRestHandler(options: RestHandlerOptions): RestHandler {
  const bodyLimit = options.bodyLimitBytes ?? MAX_BODY_BYTES;
  const codec = createRestCodec({
    threads: options.codecThreads ?? Math.max(1, Math.min(4, Math.floor(availableParallelism() / 4))),
  });
  const specs = new Map<DescMethod, MethodImplSpec>();
  for (const s of options.services) for (const m of Object.values(s.methods)) specs.set(m.method, m);

  async function readMessage(
    req: NodeRequest,
    res: NodeResponse,
    route: RestRoute,
    exchange: Exchange,
    signal: AbortSignal,
  ): Promise<unknown> {
    const contentType = req.headers["content-type"];
    const kind = restBodyKindOf(contentType);
    if (kind === undefined || (kind !== "json" && route.body !== "*")) throw palmError("unsupported_media_type");
    applyQuery(route.method.input, create(route.method.input), req.url); // a bad option is refused before the body is read
    // A multipart form is parsed as it streams in (rest-upload.ts); its boundary is checked before reading.
    const form = kind === "multipart" ? createMultipartImageReader(String(contentType)) : undefined;
    // "Expect: 100-continue" is answered only now, after the key and quota checks passed: a
    // refused client never uploads its body (server.ts defers the automatic 100 for REST paths).
    const expectsContinue = /100-continue/i.test(String(req.headers.expect ?? ""));
    const bytes = await readRequestBody(req, {
      limitBytes: bodyLimitOf(kind, bodyLimit),
      timeoutMs: options.bodyTimeoutMs,
      beforeRead: () => expectsContinue && res.writeContinue(),
      signal,
      onChunk: form && ((chunk) => form.push(chunk)),
    });
    const message =
      kind === "json"
        ? await codec.decode(route.method.input, route.body, bytes, { client: clientOf(exchange), signal })
        : uploadMessage(route.method.input, form ? form.end() : bytes);
    return applyQuery(route.method.input, message, req.url);
  }

  async function serve(req: NodeRequest, res: NodeResponse, route: RestRoute, exchange: Exchange): Promise<Answer> {
    let ctx: ReturnType<typeof createHandlerContext> | undefined;
    try {
      const spec = specs.get(route.method);
      if (spec?.kind !== "unary")
        throw palmError("internal_error", { cause: new Error(`no unary implementation of ${route.method.name}`) });
      ctx = createHandlerContext({
        service: route.method.parent,
        method: route.method,
        protocolName: "rest",
        requestMethod: req.method ?? "POST",
        url: req.url ?? "/",
        requestSignal: exchange.signal,
        shutdownSignal: options.shutdownSignal,
        requestHeader: webHeaders(req),
        contextValues: exchange.contextValues,
      });
      // The innermost interceptor reads the body: after the key and quota checks passed.
      const readBody: Interceptor = (next) => async (r) =>
        r.stream ? next(r) : next({ ...r, message: (await readMessage(req, res, route, exchange, r.signal)) as typeof r.message });
      const interceptors = route.body === "" ? [...options.interceptors] : [...options.interceptors, readBody];
      const message = await invokeUnaryImplementation(spec, ctx, create(route.method.input), interceptors);
      const headers = restHeaders(ctx.responseHeader, ctx.responseTrailer);
      headers.set("content-type", "application/json");
      headers.set(REQUEST_ID_HEADER, exchange.requestId);
      const body = await codec.encode(route.method.output, message as MessageShape<DescMessage>, { client: clientOf(exchange) });
      return { status: 200, headers, body };
    } catch (e) {
      return errorAnswer("rest", exchange.fail(e), "application/json");
    } finally {
      ctx?.abort(); // unlinks the call's signal from the shutdown signal
    }
  }

  return { serve, close: () => codec.close() };
}

/** clientOf names the client a call's codec work is done for: its codec jobs take turns with other clients' (rest-codec.ts). */
function clientOf(exchange: Exchange): string {
  return exchange.contextValues.get(kPrincipal)?.clientId ?? "";
}
