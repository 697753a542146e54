import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { AnalyzeRequestSchema, AnalyzeResponseSchema } from "../../../gen/palm/v1/palm_pb.js";
import { reasonOf } from "../../../src/errors.js";
import { requestFromJson, responseToJson } from "../../../src/rest/rest-json.js";
import { catchError } from "../../helpers/in-memory.js";

describe("responseToJson()", () => {
  it("writes proto field names, every default, and 64-bit integers as JSON numbers", () => {
    const msg = create(AnalyzeResponseSchema, {
      id: "palm_x",
      created: 1763800000n,
      results: {
        masks: {},
        stats: {
          heart: { pixels: 5120n, confidence: 0.5, coverage: 0.42, detected: true, polyline: [{ x: 1.5, y: 2 }], length: 0.8 },
          head: {},
        },
        hand: { handedness: "right", landmarks: [{ x: 3, y: 4.5 }], palmWidth: 120.5 },
      },
      usage: { requestsUsed: 17n, requestsLimit: 1000n, plan: "starter", resetsAt: 1764547200n },
    });
    const json = responseToJson(AnalyzeResponseSchema, msg) as any;
    expect(json.created).toBe(1763800000);
    expect(json.usage).toEqual({ requests_used: 17, requests_limit: 1000, plan: "starter", resets_at: 1764547200 });
    expect(json.results.stats.heart).toEqual({
      pixels: 5120,
      confidence: 0.5,
      coverage: 0.42,
      detected: true,
      polyline: [{ x: 1.5, y: 2 }],
      length: 0.8,
      reason: "",
    });
    expect(json.results.stats.head).toEqual({
      pixels: 0,
      confidence: 0,
      coverage: 0,
      detected: false,
      polyline: [],
      length: 0,
      reason: "",
    });
    expect(json.results.hand).toEqual({ handedness: "right", landmarks: [{ x: 3, y: 4.5 }], palm_width: 120.5 });
    expect(json.results.reason).toBe("");
    expect(json.results.masks).toEqual({ heart: "", head: "", life: "" });
    expect(json.model).toBe("");
  });
});

describe("requestFromJson()", () => {
  it("decodes the image leniently and ignores unknown fields", () => {
    const msg = requestFromJson(AnalyzeRequestSchema, { image: "data:image/png;base64,aG k", extra: [1, { a: 2 }] });
    expect(Buffer.from(msg.image).toString()).toBe("hi");
  });

  it("leaves a missing or null image empty (the service answers missing_image)", () => {
    expect(requestFromJson(AnalyzeRequestSchema, {}).image.byteLength).toBe(0);
    expect(requestFromJson(AnalyzeRequestSchema, { image: null }).image.byteLength).toBe(0);
  });

  it("refuses a non-string image as invalid_json and a bad string as invalid_base64", async () => {
    const a = await catchError((async () => requestFromJson(AnalyzeRequestSchema, { image: 5 }))());
    expect([a.code, reasonOf(a)]).toEqual([Code.InvalidArgument, "invalid_json"]);
    const b = await catchError((async () => requestFromJson(AnalyzeRequestSchema, { image: "%%" }))());
    expect([b.code, reasonOf(b)]).toEqual([Code.InvalidArgument, "invalid_base64"]);
  });
});
