/**
 * Every error a client can see: SPEC.md section 6 as one registry. Each reason has its Connect code,
 * its HTTP status and its client-safe message; {@link palmError} builds the `ConnectError` with the
 * `google.rpc.ErrorInfo` detail every error carries, and {@link toPalmError} maps anything caught
 * (engine, store, deadline, unknown faults) onto that registry in one place.
 * test/unit/errors.spec.ts pins the table; test/unit/readme.spec.ts fails if a reason is undocumented.
 */
import type { DescMessage, MessageInitShape } from "@bufbuild/protobuf";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, ErrorInfoSchema, QuotaFailureSchema, RetryInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { isDeadlineTooShortError, isImageError, isOverloadedError } from "./engine-errors.js";
import { codeToHttpStatus } from "./wire/private-apis.js";

/** ERROR_DOMAIN is the `domain` of every ErrorInfo detail. */
export const ERROR_DOMAIN = "palm.v1";

/** ErrorSpec describes one reason: Connect code, HTTP status, client-safe default message. */
export interface ErrorSpec {
  readonly code: Code;
  readonly httpStatus: number;
  readonly message: string;
}

function spec(code: Code, message: string, httpStatus = codeToHttpStatus(code)): ErrorSpec {
  return Object.freeze({ code, httpStatus, message });
}

/**
 * ERRORS is SPEC.md's error table. The HTTP status comes from the Connect protocol's own mapping
 * (`codeToHttpStatus`) except where SPEC.md is more specific (413, 415, 404, 405).
 */
export const ERRORS = Object.freeze({
  missing_api_key: spec(Code.Unauthenticated, "The X-API-Key header is missing."),
  invalid_api_key: spec(Code.Unauthenticated, "The API key is not valid."),
  unsupported_media_type: spec(
    Code.InvalidArgument,
    "Content-Type must be application/json, multipart/form-data, image/jpeg or image/png.",
    415,
  ),
  invalid_json: spec(Code.InvalidArgument, "The request body must be a JSON object."),
  invalid_option: spec(Code.InvalidArgument, "An answer option has a value outside its documented set."),
  invalid_multipart: spec(Code.InvalidArgument, "The request body is not a valid multipart/form-data form."),
  missing_image: spec(Code.InvalidArgument, "The image field is missing or empty."),
  invalid_base64: spec(Code.InvalidArgument, "The image field is not valid base64."),
  image_too_large: spec(Code.ResourceExhausted, "The image is larger than 5 MiB or the request body larger than 8 MiB.", 413),
  unsupported_image_format: spec(Code.InvalidArgument, "The image must be a JPEG or PNG file."),
  invalid_image: spec(Code.InvalidArgument, "The image could not be decoded."),
  image_dimensions_out_of_range: spec(
    Code.InvalidArgument,
    "Each side of the image must be 64 to 10,000 pixels, and the image at most 40 megapixels.",
  ),
  quota_exceeded: spec(Code.ResourceExhausted, "The monthly quota of this plan is used up."),
  rate_limited: spec(Code.ResourceExhausted, "Too many requests from this client; retry after the delay in Retry-After."),
  overloaded: spec(Code.Unavailable, "The server is busy; retry after the delay in Retry-After."),
  store_unavailable: spec(Code.Unavailable, "The key and quota store is unavailable; retry later."),
  timeout: spec(Code.DeadlineExceeded, "The request deadline passed before the analysis finished."),
  internal_error: spec(Code.Internal, "An internal error occurred."),
  not_found: spec(Code.Unimplemented, "No such path.", 404),
  method_not_allowed: spec(Code.Unimplemented, "This method is not allowed on this path.", 405),
  canceled: spec(Code.Canceled, "The client canceled the request."),
} satisfies Record<string, ErrorSpec>);

/** Reason is one key of {@link ERRORS}: the `code` string of REST bodies and ErrorInfo.reason. */
export type Reason = keyof typeof ERRORS;

/** isReason is the guard for {@link Reason}. */
export function isReason(s: unknown): s is Reason {
  return typeof s === "string" && Object.hasOwn(ERRORS, s);
}

/** PalmErrorOptions are the optional parts of {@link palmError}. */
export interface PalmErrorOptions {
  /** Client-safe message; default: the registry's message. */
  message?: string;
  /** Response metadata (headers/trailers) to send with the error, e.g. retry-after. */
  metadata?: HeadersInit;
  /** More detail messages after the ErrorInfo. */
  details?: { desc: DescMessage; value: MessageInitShape<DescMessage> }[];
  /** The original error; logged, never sent. */
  cause?: unknown;
}

/** palmError builds the `ConnectError` for `reason`, with its ErrorInfo detail (domain palm.v1). */
export function palmError(reason: Reason, options: PalmErrorOptions = {}): ConnectError {
  const s = ERRORS[reason];
  return new ConnectError(
    options.message ?? s.message,
    s.code,
    options.metadata,
    [{ desc: ErrorInfoSchema, value: { reason, domain: ERROR_DOMAIN } }, ...(options.details ?? [])],
    options.cause,
  );
}

/** badRequest builds an InvalidArgument-family error with a BadRequest field violation. */
export function badRequest(reason: Reason, field: string, message?: string, cause?: unknown): ConnectError {
  const description = message ?? ERRORS[reason].message;
  return palmError(reason, {
    message: description,
    cause,
    details: [{ desc: BadRequestSchema, value: { fieldViolations: [{ field, description }] } }],
  });
}

/** quotaExceeded builds the 429 error: QuotaFailure + RetryInfo details and a Retry-After header. */
export function quotaExceeded(clientId: string, limit: number, retryAfterSeconds: number, metadata: Headers): ConnectError {
  metadata.set("retry-after", String(retryAfterSeconds));
  return palmError("quota_exceeded", {
    metadata,
    details: [
      {
        desc: QuotaFailureSchema,
        value: { violations: [{ subject: `client:${clientId}`, description: `monthly limit of ${limit} analyses reached` }] },
      },
      { desc: RetryInfoSchema, value: { retryDelay: durationFromMs(retryAfterSeconds * 1000) } },
    ],
  });
}

/**
 * rateLimited builds the 429 of a client over its per-client limits (`rate_limited`, never
 * charged): QuotaFailure naming the limit, RetryInfo and a Retry-After header (whole seconds, at
 * least 1), beside the RateLimit headers already in `metadata`.
 */
export function rateLimited(clientId: string, violation: string, retryAfterSeconds: number, metadata: Headers): ConnectError {
  const seconds = Math.max(1, Math.ceil(retryAfterSeconds));
  metadata.set("retry-after", String(seconds));
  return palmError("rate_limited", {
    metadata,
    details: [
      { desc: QuotaFailureSchema, value: { violations: [{ subject: `client:${clientId}`, description: violation }] } },
      { desc: RetryInfoSchema, value: { retryDelay: durationFromMs(seconds * 1000) } },
    ],
  });
}

/** reasonOf reads the ErrorInfo reason of an error (server- or client-side), if it is ours. */
export function reasonOf(err: ConnectError): Reason | undefined {
  for (const d of err.details) {
    if ("desc" in d && d.desc.typeName === ErrorInfoSchema.typeName) {
      const r = (d.value as { reason?: unknown }).reason;
      if (isReason(r)) return r;
    }
  }
  const info = err.findDetails(ErrorInfoSchema).find((i) => i.domain === ERROR_DOMAIN);
  return isReason(info?.reason) ? info.reason : undefined;
}

/** httpStatusOf is the REST status of an error: by reason when it is ours, else by Connect code. */
export function httpStatusOf(err: ConnectError): number {
  const reason = reasonOf(err);
  return reason ? ERRORS[reason].httpStatus : codeToHttpStatus(err.code);
}

/** StoreUnavailableError is thrown by stores when the backing store cannot answer. */
export class StoreUnavailableError extends Error {
  override name = "StoreUnavailableError";
  /** Whether the command may still have run in the store (its answer was lost, e.g. a timeout). */
  readonly maybeApplied: boolean;
  constructor(message = "store unavailable", options?: { cause?: unknown; maybeApplied?: boolean }) {
    super(message, options);
    this.maybeApplied = options?.maybeApplied ?? false;
  }
}

/** isStoreUnavailableError is the guard for {@link StoreUnavailableError}. */
export function isStoreUnavailableError(e: unknown): e is StoreUnavailableError {
  return e instanceof StoreUnavailableError;
}

/**
 * toPalmError normalises anything caught into a `ConnectError` with an ErrorInfo detail:
 * - ours (has an ErrorInfo) → unchanged;
 * - ImageError → InvalidArgument (image_too_large: ResourceExhausted) + BadRequest on field "image";
 * - OverloadedError → Unavailable `overloaded` + RetryInfo + retry-after;
 * - StoreUnavailableError → Unavailable `store_unavailable` (fail closed);
 * - DeadlineTooShortError → `timeout`, saying that nothing was run;
 * - DeadlineExceeded or a timeout abort → `timeout`; Canceled → `canceled`;
 * - anything else → Internal `internal_error`, generic message, the original kept as `cause` only.
 */
export function toPalmError(e: unknown): ConnectError {
  if (e instanceof ConnectError) {
    if (reasonOf(e) !== undefined) return e;
    switch (e.code) {
      case Code.DeadlineExceeded:
        return palmError("timeout", { metadata: e.metadata, cause: e });
      case Code.Canceled:
        return palmError("canceled", { metadata: e.metadata, cause: e });
      case Code.ResourceExhausted:
        // connect's own readMaxBytes check (a compressed message that inflates past 8 MiB;
        // larger messages on the wire are refused earlier by src/server/rpc-adapter.ts).
        return palmError("image_too_large", { metadata: e.metadata, cause: e });
      default:
        return palmError("internal_error", { metadata: e.metadata, cause: e });
    }
  }
  if (isImageError(e)) return badRequest(e.code, "image", e.message, e);
  if (isOverloadedError(e)) {
    const seconds = Math.max(1, Math.ceil(e.retryAfterSeconds));
    return palmError("overloaded", {
      metadata: { "retry-after": String(seconds) },
      details: [{ desc: RetryInfoSchema, value: { retryDelay: durationFromMs(seconds * 1000) } }],
      cause: e,
    });
  }
  if (isStoreUnavailableError(e)) return palmError("store_unavailable", { cause: e });
  if (isDeadlineTooShortError(e)) return palmError("timeout", { message: e.message, cause: e });
  if (e instanceof Error && e.name === "TimeoutError") return palmError("timeout", { cause: e });
  if (e instanceof Error && e.name === "AbortError") return palmError("canceled", { cause: e });
  return palmError("internal_error", { cause: e });
}
