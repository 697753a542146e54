/**
 * connect's handlers for the RPC protocols (gRPC, gRPC-Web, Connect), behind the door (door.ts),
 * with SPEC.md's body limit enforced before connect reads the message, and the error table for
 * what connect itself refuses.
 *
 * connect-node's own `readMaxBytes` check runs before any interceptor, so a message over the
 * limit came back as connect's bare `resource_exhausted` ("message size is larger than
 * configured readMaxBytes") without the ErrorInfo every other error carries. This adapter is
 * `connectNodeAdapter` (a router, a path map, the universal request/response bridges) plus a
 * guard on the request body: it reads the envelope headers of the enveloped protocols and the
 * Content-Length of the others as the bytes arrive, and fails the body with SPEC's
 * `image_too_large` the moment the limit is crossed, before the message is buffered. Connect
 * turns that error into the protocol's answer (gRPC trailers, gRPC-Web trailer frame, Connect
 * JSON error), details included. A compressed message is bounded after decompression by
 * connect's `readMaxBytes` inside the decompressor; the adapter's gzip and brotli wrap it so
 * that a small message inflating past the limit gets the same `image_too_large` (with its
 * ErrorInfo) instead of connect's bare `resource_exhausted`.
 */
import {
  Code,
  ConnectError,
  createConnectRouter,
  type ConnectRouter,
  type Interceptor,
  type ConnectRouterOptions,
} from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  universalRequestFromNodeRequest,
  universalResponseToNodeResponse,
} from "@connectrpc/connect-node";
import type { Exchange } from "../request/context-keys.js";
import { endOfStream, readConnectError, readEndOfStream, readTrailerError, rewriteTrailer } from "../wire/error-answer.js";
import { isEnveloped, wireProtocolOf, type NodeRequest, type NodeResponse, type WireProtocol } from "../wire/http.js";
import {
  codeToHttpStatus,
  encodeEnvelope,
  endStreamFlag,
  errorToJsonBytes,
  trailerFlag,
  type Compression,
  type UniversalHandler,
  type UniversalServerResponse,
} from "../wire/private-apis.js";
import { REQUEST_ID_HEADER } from "../request/request-id.js";
import { palmError, reasonOf, toPalmError } from "../errors.js";
import { releaseUnreadBody } from "./respond.js";

/** RpcAdapterOptions configure {@link createRpcAdapter}. */
export interface RpcAdapterOptions extends ConnectRouterOptions {
  routes: (router: ConnectRouter) => void;
  /** Largest request message (enveloped protocols) or body (Connect unary), bytes. */
  maxBodyBytes: number;
}

/** ENVELOPE_HEADER_BYTES: flags (1) + big-endian length (4) before each enveloped message. */
const ENVELOPE_HEADER_BYTES = 5;

/**
 * limitRequestBody passes `body` through unchanged while it stays within `maxBytes`:
 * enveloped bodies per message (each envelope header's declared length is checked as soon as
 * its 5 bytes are in), other bodies in total. Crossing the limit throws `tooLarge()` from the
 * iteration, before the rest of the body is read.
 */
export async function* limitRequestBody(
  body: AsyncIterable<Uint8Array>,
  enveloped: boolean,
  maxBytes: number,
  tooLarge: () => Error,
): AsyncIterable<Uint8Array> {
  let total = 0;
  // Enveloped: bytes left of the current message, and the header bytes gathered so far.
  let remaining = 0;
  const header = new Uint8Array(ENVELOPE_HEADER_BYTES);
  let headerFill = 0;
  for await (const chunk of body) {
    total += chunk.byteLength;
    if (!enveloped) {
      if (total > maxBytes) throw tooLarge();
      yield chunk;
      continue;
    }
    let pos = 0;
    while (pos < chunk.byteLength) {
      if (remaining > 0) {
        const take = Math.min(remaining, chunk.byteLength - pos);
        remaining -= take;
        pos += take;
        continue;
      }
      header[headerFill++] = chunk[pos++];
      if (headerFill === ENVELOPE_HEADER_BYTES) {
        const length = new DataView(header.buffer).getUint32(1, false);
        if (length > maxBytes) throw tooLarge();
        remaining = length;
        headerFill = 0;
      }
    }
    yield chunk;
  }
}

/**
 * limitedCompression is `compression` whose decompressor reports a message that inflates past
 * its byte limit as `tooLarge()` (connect's decompressors say `resource_exhausted` with no
 * details). Other decompression failures (corrupt data) pass through unchanged.
 */
export function limitedCompression(compression: Compression, tooLarge: () => Error): Compression {
  return {
    name: compression.name,
    compress: (bytes) => compression.compress(bytes),
    decompress: (bytes, readMaxBytes) =>
      compression.decompress(bytes, readMaxBytes).catch((reason: unknown) => {
        if (reason instanceof ConnectError && reason.code === Code.ResourceExhausted) throw tooLarge();
        throw reason;
      }),
  };
}

/**
 * clientFault maps an error that connect detected before any interceptor ran (the message could
 * not be split, decompressed or parsed; a compressed flag without an encoding) to the error
 * table: the client's fault is `invalid_json` (InvalidArgument), never INTERNAL; deadlines,
 * cancels and size limits keep their own rows.
 */
export function clientFault(e: ConnectError, contentType: string): ConnectError {
  if (reasonOf(e) !== undefined) return e;
  switch (e.code) {
    case Code.DeadlineExceeded:
    case Code.Canceled:
    case Code.ResourceExhausted:
      return toPalmError(e);
    default:
      // The words fit the client's encoding: no "JSON" in the answer to a protobuf body.
      return palmError("invalid_json", { cause: e, message: isProtobuf(contentType) ? MALFORMED_PROTOBUF_MESSAGE : undefined });
  }
}

/** MALFORMED_PROTOBUF_MESSAGE is `invalid_json`'s message for a binary protobuf request (test/integration/malformed-rpc.spec.ts). */
export const MALFORMED_PROTOBUF_MESSAGE =
  "The request message is not a readable protobuf message (truncated, malformed or not compressed as declared).";

/** isProtobuf tells a binary protobuf content type (gRPC and gRPC-Web default to it) from a JSON one. */
function isProtobuf(contentType: string): boolean {
  const ct = contentType.toLowerCase().split(";", 1)[0].trim();
  if (ct.endsWith("+json") || ct === "application/json") return false;
  return ct.startsWith("application/grpc") || ct.endsWith("proto");
}

/**
 * recorded tells whether an error answer's status metadata carries our request id: the outcome
 * interceptor puts it on every error it sees; errors found by connect before it, or while a
 * stream's input is read, have none.
 */
const recorded = (h: Headers | undefined) => h?.has(REQUEST_ID_HEADER) === true;

/**
 * inputFaults makes an error while reading a streaming call's input messages (they are parsed
 * and decompressed as the service reads them, inside the interceptors) the client's fault:
 * `invalid_json` by {@link clientFault}, never INTERNAL (test/integration/malformed-rpc.spec.ts).
 */
export const inputFaults: Interceptor = (next) => async (req) => {
  if (!req.stream) return next(req);
  const input = req.message;
  const message = (async function* () {
    try {
      yield* input;
    } catch (e) {
      throw clientFault(ConnectError.from(e), req.header.get("content-type") ?? "");
    }
  })();
  return next({ ...req, message });
};

/**
 * mapLibraryErrors rewrites, in place, an error answer that did not pass the outcome interceptor
 * (no request id on it: connect refused the message before any interceptor) into the error
 * table's answer, noted on the exchange. gRPC: the trailers are rewritten after the body has run;
 * Connect unary: the JSON error body and status are replaced; gRPC-Web and Connect streaming: such
 * an answer is one trailer (end-stream) message, which is replaced
 * (test/integration/malformed-rpc.spec.ts).
 */
async function mapLibraryErrors(
  uRes: UniversalServerResponse,
  wire: WireProtocol,
  contentType: string,
  exchange: Exchange,
): Promise<UniversalServerResponse> {
  const note = (found: ConnectError) => exchange.fail(clientFault(found, contentType));
  const body = uRes.body as AsyncIterable<Uint8Array> | undefined;
  if ((wire === "grpc-web" || wire === "connect-stream") && body) {
    const flag = wire === "grpc-web" ? trailerFlag : endStreamFlag;
    return {
      ...uRes,
      body: rewriteFirstEnvelope(body, flag, async (payload) => {
        const end = readEndOfStream(wire, payload);
        if (!end?.error) return undefined;
        // The request id on every answer: connect puts an error's metadata in the end-stream message only.
        const id = end.metadata.get(REQUEST_ID_HEADER);
        if (id !== null) {
          if (wire === "connect-stream") uRes.header?.set(REQUEST_ID_HEADER, id);
          return undefined;
        }
        const err = note(end.error);
        if (wire === "connect-stream") uRes.header?.set(REQUEST_ID_HEADER, exchange.requestId);
        return endOfStream(wire, err);
      }),
    };
  }
  if (wire === "grpc" && uRes.trailer) {
    const trailer = uRes.trailer;
    const rewrite = () => {
      const found = readTrailerError(trailer);
      if (found && !recorded(trailer)) rewriteTrailer(trailer, note(found));
    };
    if (!body) {
      rewrite();
      return uRes;
    }
    return {
      ...uRes,
      body: (async function* () {
        try {
          yield* body;
        } finally {
          rewrite();
        }
      })(),
    };
  }
  if (wire === "connect" && uRes.status !== 200 && !recorded(uRes.header)) {
    const chunks: Uint8Array[] = [];
    for await (const c of body ?? []) chunks.push(c);
    const found = readConnectError(Buffer.concat(chunks), new ConnectError("", Code.Internal));
    if (!found) {
      // connect's own bodiless refusals (405, 415) stay as they are, noted by their status.
      exchange.fail(
        palmError(uRes.status === 415 ? "unsupported_media_type" : uRes.status === 405 ? "method_not_allowed" : "invalid_json"),
      );
      return {
        ...uRes,
        body: (async function* () {
          yield* chunks;
        })(),
      };
    }
    const err = note(found);
    const header = new Headers(uRes.header);
    err.metadata.forEach((v, k) => {
      header.set(k, v);
    });
    header.set("content-type", "application/json");
    const bytes = errorToJsonBytes(err, {});
    header.set("content-length", String(bytes.byteLength));
    return {
      status: codeToHttpStatus(err.code),
      header,
      body: (async function* () {
        yield bytes;
      })(),
    };
  }
  return uRes;
}

/**
 * rewriteFirstEnvelope passes an enveloped body through, except that when its first message
 * has `flag` set (a trailer or end-stream message), `rewrite` may replace that message's payload.
 */
async function* rewriteFirstEnvelope(
  body: AsyncIterable<Uint8Array>,
  flag: number,
  rewrite: (payload: Uint8Array) => Promise<Uint8Array | undefined>,
): AsyncIterable<Uint8Array> {
  const it = body[Symbol.asyncIterator]();
  let head: Uint8Array = new Uint8Array(0);
  for (;;) {
    const r = await it.next();
    if (r.done) {
      if (head.byteLength > 0) yield head;
      return;
    }
    head = head.byteLength === 0 ? r.value : Buffer.concat([head, r.value]);
    if (head.byteLength < ENVELOPE_HEADER_BYTES) continue;
    const end = ENVELOPE_HEADER_BYTES + new DataView(head.buffer, head.byteOffset, head.byteLength).getUint32(1, false);
    if (head.byteLength < end) continue;
    if ((head[0] & flag) === flag) {
      const payload = await rewrite(head.subarray(ENVELOPE_HEADER_BYTES, end));
      if (payload) head = Buffer.concat([encodeEnvelope(head[0], payload), head.subarray(end)]);
    }
    break;
  }
  yield head;
  yield* { [Symbol.asyncIterator]: () => it };
}

/** refused is a body whose first read throws `tooLarge()`. */
// biome-ignore lint/correctness/useYield: a body that never yields: its first read throws.
async function* refused(tooLarge: () => Error): AsyncIterable<Uint8Array> {
  throw tooLarge();
}

/** RpcAdapter is connect's handlers by request path and the way into them. */
export interface RpcAdapter {
  /** connect's handler of each RPC path. */
  readonly paths: ReadonlyMap<string, UniversalHandler>;
  /** serve runs a request the door let in through connect's handler, with its exchange's context values. */
  serve(req: NodeRequest, res: NodeResponse, handler: UniversalHandler, exchange: Exchange): Promise<void>;
}

/** createRpcAdapter registers the routes on a connect router and returns {@link RpcAdapter}. */
export function createRpcAdapter(options: RpcAdapterOptions): RpcAdapter {
  const { routes, maxBodyBytes, ...routerOptions } = options;
  const tooLarge = () => palmError("image_too_large");
  const router = createConnectRouter({
    acceptCompression: [compressionGzip, compressionBrotli].map((c) => limitedCompression(c, tooLarge)),
    ...routerOptions,
    interceptors: [...(routerOptions.interceptors ?? []), inputFaults],
  });
  routes(router);
  const paths = new Map<string, UniversalHandler>();
  for (const handler of router.handlers) paths.set(handler.requestPath, handler);

  const serve = async (req: NodeRequest, res: NodeResponse, handler: UniversalHandler, exchange: Exchange) => {
    const uReq = universalRequestFromNodeRequest(req, res, undefined, exchange.contextValues);
    // The body as a byte stream that is paused, not destroyed, when connect stops reading it
    // early (a refusal): destroying it would reset the connection under the answer.
    const raw = req.iterator({ destroyOnReturn: false }) as AsyncIterable<Uint8Array>;
    const contentType = uReq.header.get("content-type") ?? "";
    const wire = wireProtocolOf(contentType, true);
    const enveloped = isEnveloped(wire);
    const declared = Number(uReq.header.get("content-length") ?? "");
    // connect would refuse a Content-Length over its readMaxBytes with its own error before
    // reading; refuse it here with SPEC's, without reading the body either.
    const refuse = !enveloped && Number.isFinite(declared) && declared > maxBodyBytes;
    if (refuse) uReq.header.delete("content-length");
    const body = refuse ? refused(tooLarge) : limitRequestBody(raw, enveloped, maxBodyBytes, tooLarge);
    // Errors connect detects before any interceptor get the error table's answer, noted on the
    // exchange (test/integration/malformed-rpc.spec.ts).
    try {
      const uRes = await mapLibraryErrors(await handler({ ...uReq, body }), wire, contentType, exchange);
      releaseUnreadBody(req, res);
      await universalResponseToNodeResponse(uRes, res);
    } catch (reason) {
      if (ConnectError.from(reason).code === Code.Aborted) return;
      exchange.logger.error({ err: reason }, "rpc handler failed");
    }
  };
  return { paths, serve };
}
