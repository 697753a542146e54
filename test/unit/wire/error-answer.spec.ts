/**
 * Errors in each wire format, read back with connect's own client-side parsers. Connect streaming
 * has no keyed method to reach it over the network today, so its end-stream answer is pinned
 * here; the others are also covered end to end by test/integration/door.spec.ts.
 */
import { endStreamFromJson, errorFromJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError } from "@connectrpc/connect/protocol-grpc";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { ERRORS, palmError, reasonOf } from "../../../src/errors.js";
import { endOfStream, errorAnswer, readEndOfStream } from "../../../src/wire/error-answer.js";

const refusal = () => {
  const err = palmError("invalid_api_key");
  err.metadata.set("x-request-id", "palm_01TEST");
  return err;
};

describe("errorAnswer()", () => {
  it("writes Connect streaming as 200 and one end-stream message with the error, its ErrorInfo and the request id", () => {
    const a = errorAnswer("connect-stream", refusal(), "application/connect+proto");
    expect(a.status).toBe(200);
    expect(a.headers.get("content-type")).toBe("application/connect+proto");
    expect(a.headers.get("x-request-id")).toBe("palm_01TEST");
    const body = Buffer.from(a.body);
    expect(body[0]).toBe(2); // end-stream flag
    expect(body.readUInt32BE(1)).toBe(body.byteLength - 5);
    const end = endStreamFromJson(body.subarray(5));
    expect(end.error?.code).toBe(Code.Unauthenticated);
    expect(end.error?.rawMessage).toBe(ERRORS.invalid_api_key.message);
    expect(end.error?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("invalid_api_key");
    expect(end.metadata.get("x-request-id")).toBe("palm_01TEST");
  });

  it("writes gRPC and gRPC-Web trailers-only: an empty body and the status in the headers, once each", () => {
    for (const ct of ["application/grpc", "application/grpc-web+proto"]) {
      const a = errorAnswer(ct.includes("web") ? "grpc-web" : "grpc", refusal(), ct);
      expect([a.status, a.body.byteLength, a.headers.get("content-type")]).toEqual([200, 0, ct]);
      expect(a.headers.get("x-request-id")).toBe("palm_01TEST");
      const err = findTrailerError(a.headers);
      expect(err && reasonOf(err)).toBe("invalid_api_key");
    }
  });

  it("writes Connect unary as the HTTP status of the code and Connect's JSON error", () => {
    const a = errorAnswer("connect", refusal(), "application/proto");
    expect(a.status).toBe(401);
    const err = errorFromJsonBytes(a.body, undefined, new ConnectError("", Code.Internal));
    expect(reasonOf(err)).toBe("invalid_api_key");
  });

  it("writes REST as SPEC's JSON error with the request id", () => {
    const a = errorAnswer("rest", refusal(), "application/json");
    expect(a.status).toBe(401);
    expect(JSON.parse(Buffer.from(a.body).toString())).toEqual({
      error: { code: "invalid_api_key", message: ERRORS.invalid_api_key.message, status: 401, request_id: "palm_01TEST" },
    });
    expect(a.headers.get("x-request-id")).toBe("palm_01TEST");
  });
});

describe("endOfStream()", () => {
  it("writes a gRPC-Web trailer frame and a Connect end-stream message that readEndOfStream() reads back", () => {
    for (const wire of ["grpc-web", "connect-stream"] as const) {
      const end = readEndOfStream(wire, endOfStream(wire, refusal()));
      expect(end?.error && reasonOf(end.error)).toBe("invalid_api_key");
      expect(end?.metadata.get("x-request-id")).toBe("palm_01TEST");
    }
  });

  it("reads an unreadable payload as undefined", () => {
    expect(readEndOfStream("connect-stream", new TextEncoder().encode("{not json"))).toBeUndefined();
  });
});
