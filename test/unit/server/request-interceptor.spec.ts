import { Writable } from "node:stream";
import { createClient, createRouterTransport } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { PalmService } from "../../../gen/palm/v1/palm_pb.js";
import { createLogger } from "../../../src/log.js";
import { newRequestId } from "../../../src/api/request-id.js";
import { createRequestInterceptor } from "../../../src/server/request-interceptor.js";
import { catchError } from "../../helpers/in-memory.js";

function setup(analyze: () => never | Promise<never>) {
  const lines: any[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(JSON.parse(String(chunk)));
      cb();
    },
  });
  const logger = createLogger({ level: "info", destination: sink });
  const transport = createRouterTransport((router) => router.service(PalmService, { analyze, health: () => ({ status: "ok" }) }), {
    router: { interceptors: [createRequestInterceptor({ logger })] },
  });
  return { client: createClient(PalmService, transport), lines };
}

describe("newRequestId()", () => {
  it("makes unique, time-ordered palm_ ULIDs", () => {
    const ids = Array.from({ length: 1000 }, () => newRequestId());
    expect(new Set(ids).size).toBe(1000);
    for (const id of ids) expect(id).toMatch(/^palm_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(newRequestId(1_000).slice(0, 15) < newRequestId(2_000_000_000_000).slice(0, 15)).toBe(true);
  });
});

describe("createRequestInterceptor()", () => {
  it("sends x-request-id and logs one line per call", async () => {
    const { client, lines } = setup(() => {
      throw new Error("unused");
    });
    let header: Headers | undefined;
    await client.health({}, { onHeader: (h) => (header = h) });
    expect(header?.get("x-request-id")).toMatch(/^palm_/);
    await new Promise((r) => setImmediate(r));
    expect(lines.at(-1)).toMatchObject({
      msg: "request",
      request_id: header?.get("x-request-id"),
      protocol: "connect",
      method: "palm.v1.PalmService/Health",
      status: 200,
      code: "ok",
    });
    expect(lines.at(-1).latency_ms).toBeTypeOf("number");
  });

  it("turns an unexpected throw into internal_error with a generic message, logging the cause at error", async () => {
    const { client, lines } = setup(() => {
      throw new Error("db password is hunter2");
    });
    const err = await catchError(client.analyze({}));
    expect(err.rawMessage).toBe("An internal error occurred.");
    expect(err.findDetails(ErrorInfoSchema)[0].reason).toBe("internal_error");
    expect(err.metadata.get("x-request-id")).toMatch(/^palm_/);
    await new Promise((r) => setImmediate(r));
    expect(lines.at(-1)).toMatchObject({ level: 50, status: 500, code: "internal_error" });
    expect(lines.at(-1).err.message).toBe("db password is hunter2");
  });
});
