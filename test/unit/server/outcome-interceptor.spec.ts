import { createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { PalmService } from "../../../gen/palm/v1/palm_pb.js";
import { newRequestId } from "../../../src/request/request-id.js";
import { createOutcomeInterceptor } from "../../../src/server/outcome-interceptor.js";
import { catchError } from "../../helpers/in-memory.js";

function setup(analyze: () => never | Promise<never>) {
  const transport = createRouterTransport((router) => router.service(PalmService, { analyze, health: () => ({ status: "ok" }) }), {
    router: { interceptors: [createOutcomeInterceptor()] },
  });
  return createClient(PalmService, transport);
}

describe("newRequestId()", () => {
  it("makes unique, time-ordered palm_ ULIDs", () => {
    const ids = Array.from({ length: 1000 }, () => newRequestId());
    expect(new Set(ids).size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^palm_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(newRequestId(1_000).slice(0, 15) < newRequestId(2_000_000_000_000).slice(0, 15)).toBe(true);
  });
});

describe("createOutcomeInterceptor()", () => {
  it("sends x-request-id with a success", async () => {
    const client = setup(() => {
      throw new Error("unused");
    });
    let header: Headers | undefined;
    await client.health({}, { onHeader: (h) => (header = h) });
    expect(header?.get("x-request-id")).toMatch(/^palm_/);
  });

  it("turns an unexpected throw into internal_error with a generic message and the request id", async () => {
    const client = setup(() => {
      throw new Error("db password is hunter2");
    });
    const err = await catchError(client.analyze({}));
    expect(err.rawMessage).toBe("An internal error occurred.");
    expect(err.findDetails(ErrorInfoSchema)[0].reason).toBe("internal_error");
    expect(err.metadata.get("x-request-id")).toMatch(/^palm_/);
  });
});
