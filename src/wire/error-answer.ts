/**
 * Writing an error in the caller's wire format, in one module for every layer: the door's
 * refusals, the RPC adapter's rewrite of errors connect found itself, REST, and the HTTP front's
 * answer to headers that never came. Each is read back by connect's own client-side parsers in
 * test/unit/server/error-answer.spec.ts.
 */
import type { ConnectError } from "@connectrpc/connect";
import { httpStatusOf, reasonOf, toPalmError } from "../errors.js";
import type { WireProtocol } from "./http.js";
import {
  encodeEnvelope,
  endStreamFlag,
  endStreamFromJson,
  endStreamToJson,
  errorFromJsonBytes,
  errorToJsonBytes,
  codeToHttpStatus,
  findTrailerError,
  setTrailerStatus,
  trailerParse,
  trailerSerialize,
} from "./private-apis.js";
import { newRequestId, REQUEST_ID_HEADER } from "../request/request-id.js";

/** Answer is a complete response: status, headers and the whole body. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Uint8Array;
}

/**
 * errorAnswer writes `err` (normalised, request id in its metadata) in `protocol`'s wire format:
 * gRPC and gRPC-Web trailers-only (the status in the only HEADERS frame), Connect unary as the
 * code's HTTP status and Connect's JSON error, Connect streaming as one end-stream message, REST
 * as SPEC.md's JSON error.
 */
export function errorAnswer(protocol: WireProtocol, err: ConnectError, contentType: string): Answer {
  switch (protocol) {
    case "grpc":
    case "grpc-web": {
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
      return { status: 200, headers, body: encodeEnvelope(endStreamFlag, endOfStream("connect-stream", err)) };
    }
    case "rest":
      return restErrorAnswer(err);
  }
}

/** restErrorAnswer is SPEC.md's JSON error answer of `e` (its metadata's request id, quota and Retry-After headers). */
function restErrorAnswer(e: ConnectError): Answer {
  const err = reasonOf(e) === undefined ? toPalmError(e) : e;
  const status = httpStatusOf(err);
  const headers = restHeaders(err.metadata);
  headers.set("content-type", "application/json");
  const requestId = err.metadata.get(REQUEST_ID_HEADER) ?? newRequestId();
  headers.set(REQUEST_ID_HEADER, requestId);
  const error = { code: reasonOf(err) ?? "internal_error", message: err.rawMessage, status, request_id: requestId };
  return { status, headers, body: Buffer.from(JSON.stringify({ error })) };
}

/** Response headers REST forwards from an RPC's metadata: ours (x-…), Retry-After and Allow. */
const isRestHeader = (name: string) =>
  name.startsWith("x-") || name === "retry-after" || name === "allow" || name === "ratelimit" || name === "ratelimit-policy";

/** restHeaders are the headers of `sources` a REST answer carries ({@link isRestHeader}). */
export function restHeaders(...sources: Headers[]): Headers {
  const out = new Headers();
  for (const h of sources) {
    h.forEach((value, name) => {
      if (isRestHeader(name)) out.set(name, value);
    });
  }
  return out;
}

/** StreamEnd is the error (if any) and metadata of a gRPC-Web trailer frame or a Connect end-stream message. */
export interface StreamEnd {
  readonly error?: ConnectError;
  readonly metadata: Headers;
}

/** readEndOfStream parses the payload of a gRPC-Web trailer frame or a Connect end-stream message; undefined if unreadable. */
export function readEndOfStream(protocol: "grpc-web" | "connect-stream", payload: Uint8Array): StreamEnd | undefined {
  try {
    if (protocol === "connect-stream") return endStreamFromJson(payload);
    const metadata = trailerParse(payload);
    return { error: findTrailerError(metadata), metadata };
  } catch {
    return undefined;
  }
}

/** endOfStream is the payload of a gRPC-Web trailer frame or a Connect end-stream message ending in `err`, its metadata once. */
export function endOfStream(protocol: "grpc-web" | "connect-stream", err: ConnectError): Uint8Array {
  if (protocol === "grpc-web") return trailerSerialize(setTrailerStatus(new Headers(), err));
  return new TextEncoder().encode(JSON.stringify(endStreamToJson(new Headers(), err, {})));
}

/** readTrailerError is the error of gRPC trailers, if any. */
export function readTrailerError(trailer: Headers): ConnectError | undefined {
  return findTrailerError(trailer);
}

/** rewriteTrailer replaces gRPC trailers, in place, by those of `err`. */
export function rewriteTrailer(trailer: Headers, err: ConnectError): void {
  for (const k of [...trailer.keys()]) trailer.delete(k);
  setTrailerStatus(trailer, err);
}

/** readConnectError parses Connect's JSON error body; undefined if it is not one. */
export function readConnectError(body: Uint8Array, fallback: ConnectError): ConnectError | undefined {
  try {
    return errorFromJsonBytes(body, undefined, fallback);
  } catch {
    return undefined;
  }
}
