/**
 * Reading a REST body as a stream with a hard byte limit and a deadline: a body over the limit
 * is refused (413 image_too_large) as soon as the limit is crossed — or at once from its
 * Content-Length — without reading it to the end; a client trickling its body is cut off.
 */
import type { IncomingMessage } from "node:http";
import type { Http2ServerRequest } from "node:http2";
import { MAX_BODY_BYTES } from "../limits.js";
import { palmError } from "../errors.js";
import { declaredLength } from "../wire/http.js";

/** ReadBodyOptions configure {@link readRequestBody}. */
export interface ReadBodyOptions {
  /** Byte limit. Default {@link MAX_BODY_BYTES}. */
  limitBytes?: number;
  /** Deadline for the whole body, ms. */
  timeoutMs: number;
  /** Called once the declared length passed the check, just before reading (e.g. to send 100 Continue). */
  beforeRead?: () => void;
  /**
   * Aborted when the client is gone (its socket or stream closed): the read fails with
   * `canceled` at once, also when that happened before the read began (while the key was being
   * checked), instead of waiting for the body deadline (test/integration/quota-leases.spec.ts).
   */
  signal?: AbortSignal;
  /**
   * Takes each chunk as it arrives instead of collecting it (the body then resolves empty); a
   * throw refuses the body at once with that error (rest-upload.ts's multipart reader).
   */
  onChunk?: (chunk: Buffer) => void;
}

/** readRequestBody collects the body; rejects with image_too_large, timeout or canceled. */
export function readRequestBody(req: IncomingMessage | Http2ServerRequest, options: ReadBodyOptions): Promise<Buffer> {
  const limit = options.limitBytes ?? MAX_BODY_BYTES;
  const declared = declaredLength(req);
  if (declared !== undefined && declared > limit) return Promise.reject(palmError("image_too_large"));
  const signal = options.signal;
  if (signal?.aborted || req.destroyed) return Promise.reject(palmError("canceled"));
  options.beforeRead?.();
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      clearTimeout(timer);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("aborted", onError);
      signal?.removeEventListener("abort", onError);
      req.pause();
    };
    const fail = (e: unknown) => {
      cleanup();
      reject(e);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength;
      if (size > limit) return fail(palmError("image_too_large"));
      if (!options.onChunk) return void chunks.push(chunk);
      try {
        options.onChunk(chunk);
      } catch (e) {
        fail(e);
      }
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks));
    };
    const onError = () => fail(palmError("canceled"));
    const timer = setTimeout(
      () => fail(palmError("timeout", { message: "The request body was not received in time." })),
      options.timeoutMs,
    );
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onError);
    req.once("aborted", onError);
    signal?.addEventListener("abort", onError, { once: true });
  });
}

/** isJsonContentType accepts `application/json` with optional parameters (e.g. charset). */
export function isJsonContentType(value: string | undefined): boolean {
  if (value === undefined) return false;
  return value.split(";", 1)[0].trim().toLowerCase() === "application/json";
}
