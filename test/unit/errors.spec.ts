import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { ERRORS, httpStatusOf, palmError, reasonOf, StoreUnavailableError, toPalmError } from "../../src/errors.js";
import { ImageError, OverloadedError } from "../../src/engine-errors.js";

/** SPEC.md section 6, row by row. */
const SPEC_TABLE: [string, number, Code][] = [
  ["missing_api_key", 401, Code.Unauthenticated],
  ["invalid_api_key", 401, Code.Unauthenticated],
  ["unsupported_media_type", 415, Code.InvalidArgument],
  ["invalid_json", 400, Code.InvalidArgument],
  ["invalid_multipart", 400, Code.InvalidArgument],
  ["invalid_option", 400, Code.InvalidArgument],
  ["missing_image", 400, Code.InvalidArgument],
  ["invalid_base64", 400, Code.InvalidArgument],
  ["image_too_large", 413, Code.ResourceExhausted],
  ["unsupported_image_format", 400, Code.InvalidArgument],
  ["invalid_image", 400, Code.InvalidArgument],
  ["image_dimensions_out_of_range", 400, Code.InvalidArgument],
  ["quota_exceeded", 429, Code.ResourceExhausted],
  ["rate_limited", 429, Code.ResourceExhausted],
  ["overloaded", 503, Code.Unavailable],
  ["store_unavailable", 503, Code.Unavailable],
  ["timeout", 504, Code.DeadlineExceeded],
  ["internal_error", 500, Code.Internal],
  ["not_found", 404, Code.Unimplemented],
  ["method_not_allowed", 405, Code.Unimplemented],
];

describe("ERRORS", () => {
  it.each(SPEC_TABLE)("maps %s to HTTP %i and its Connect code", (reason, http, code) => {
    const spec = ERRORS[reason as keyof typeof ERRORS];
    expect({ http: spec.httpStatus, code: spec.code }).toEqual({ http, code });
  });

  it("has no reason outside SPEC.md except the log-only canceled", () => {
    expect(Object.keys(ERRORS).sort()).toEqual([...SPEC_TABLE.map((r) => r[0]), "canceled"].sort());
  });
});

describe("palmError()", () => {
  it("carries an ErrorInfo with the reason and domain palm.v1", () => {
    const err = palmError("invalid_api_key");
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toBe("The API key is not valid.");
    expect(err.findDetails(ErrorInfoSchema)).toMatchObject([{ reason: "invalid_api_key", domain: "palm.v1" }]);
    expect(reasonOf(err)).toBe("invalid_api_key");
    expect(httpStatusOf(err)).toBe(401);
  });
});

describe("toPalmError()", () => {
  it("maps ImageError codes to InvalidArgument with a BadRequest on field image", () => {
    const err = toPalmError(new ImageError("invalid_image", "The JPEG is truncated."));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toBe("The JPEG is truncated.");
    expect(reasonOf(err)).toBe("invalid_image");
    expect(err.findDetails(BadRequestSchema)[0].fieldViolations[0].field).toBe("image");
  });

  it("maps an oversized image to ResourceExhausted and HTTP 413", () => {
    const err = toPalmError(new ImageError("image_too_large", "too big"));
    expect([err.code, httpStatusOf(err)]).toEqual([Code.ResourceExhausted, 413]);
  });

  it("maps OverloadedError to Unavailable with RetryInfo and retry-after", () => {
    const err = toPalmError(new OverloadedError(2.2));
    expect([err.code, reasonOf(err), err.metadata.get("retry-after")]).toEqual([Code.Unavailable, "overloaded", "3"]);
    expect(Number(err.findDetails(RetryInfoSchema)[0].retryDelay?.seconds)).toBe(3);
  });

  it("maps StoreUnavailableError to Unavailable store_unavailable", () => {
    const err = toPalmError(new StoreUnavailableError("redis down"));
    expect([err.code, reasonOf(err), err.rawMessage]).toEqual([Code.Unavailable, "store_unavailable", ERRORS.store_unavailable.message]);
  });

  it("maps DeadlineExceeded and timeout aborts to timeout", () => {
    expect(reasonOf(toPalmError(new ConnectError("x", Code.DeadlineExceeded)))).toBe("timeout");
    expect(reasonOf(toPalmError(new DOMException("t", "TimeoutError")))).toBe("timeout");
  });

  it("hides anything unexpected behind internal_error, keeping it only as the cause", () => {
    const cause = new TypeError("Cannot read properties of undefined (reading 'data') at /srv/app.ts:12");
    const err = toPalmError(cause);
    expect([err.code, reasonOf(err), err.rawMessage]).toEqual([Code.Internal, "internal_error", "An internal error occurred."]);
    expect(err.cause).toBe(cause);
  });

  it("leaves an error that already has our ErrorInfo unchanged", () => {
    const err = palmError("quota_exceeded");
    expect(toPalmError(err)).toBe(err);
  });
});
