/**
 * The engine's errors that the error table maps (src/errors.ts): thrown by the image and
 * inference layers, defined here so that the table depends on nothing above it.
 */

/** IMAGE_ERROR_CODES are the SPEC.md error codes an image itself can cause. */
export const IMAGE_ERROR_CODES = ["unsupported_image_format", "invalid_image", "image_dimensions_out_of_range", "image_too_large"] as const;

/** ImageErrorCode is one of {@link IMAGE_ERROR_CODES}. */
export type ImageErrorCode = (typeof IMAGE_ERROR_CODES)[number];

/**
 * ImageError is thrown by the engine for input the client must fix. `message` is safe to show
 * to clients; `cause` (never shown) keeps the decoder's own error.
 */
export class ImageError extends Error {
  override name = "ImageError";
  constructor(
    readonly code: ImageErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** isImageError is the guard for {@link ImageError}. */
export function isImageError(e: unknown): e is ImageError {
  return e instanceof ImageError;
}

/**
 * OverloadedError is thrown when this replica already has its maximum of analyses in flight
 * and queued. `retryAfterSeconds` is a hint for the Retry-After header.
 */
export class OverloadedError extends Error {
  override name = "OverloadedError";
  constructor(readonly retryAfterSeconds: number) {
    super("Too many requests in flight on this replica.");
  }
}

/** isOverloadedError is the guard for {@link OverloadedError}. */
export function isOverloadedError(e: unknown): e is OverloadedError {
  return e instanceof OverloadedError;
}

/**
 * DeadlineTooShortError is thrown, before anything runs, for an analysis whose deadline is
 * shorter than the time it is expected to take (admission.ts): 504 `timeout`, never charged.
 */
export class DeadlineTooShortError extends Error {
  override name = "DeadlineTooShortError";
  constructor(
    readonly remainingMs: number,
    readonly expectedMs: number,
  ) {
    super("The request deadline is shorter than the analysis is expected to take; nothing was run.");
  }
}

/** isDeadlineTooShortError is the guard for {@link DeadlineTooShortError}. */
export function isDeadlineTooShortError(e: unknown): e is DeadlineTooShortError {
  return e instanceof DeadlineTooShortError;
}
