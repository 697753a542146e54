import { Code } from "@connectrpc/connect";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema, ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { createMemoryStore } from "../../../src/auth/memory-store.js";
import type { Store } from "../../../src/auth/store.js";
import type { EngineAnalyzer } from "../../../src/inference/analyzer.js";
import { createFailingAnalyzer, createTestAnalyzer } from "../../helpers/analyzer.js";
import { makeImage } from "../../helpers/images.js";
import { catchError, createInMemoryService } from "../../helpers/in-memory.js";
import { registerKey } from "../../helpers/keys.js";

let analyzer: EngineAnalyzer;
let image: Buffer;
let store: Store;
let headers: Record<string, string>;
beforeAll(async () => {
  [analyzer, image] = await Promise.all([createTestAnalyzer(), makeImage(160, 120, "png")]);
  store = createMemoryStore();
  headers = { "x-api-key": await registerKey(store, "acme", "pro") };
});
afterAll(() => analyzer?.close());

describe("createPalmService()", () => {
  it("answers Analyze with the engine's overlay, masks and stats in SPEC.md's shape", async () => {
    const { palm } = createInMemoryService({ analyzer, store });
    const res = await palm.analyze({ image }, { headers });
    expect(res.id).toMatch(/^palm_/);
    expect(res.object).toBe("palm.analysis");
    expect(res.model).toBe(analyzer.model);
    expect(Math.abs(Number(res.created) - Date.now() / 1000)).toBeLessThan(60);
    const meta = await sharp(res.results!.overlay).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(["jpeg", 160, 120]);
    for (const line of ["heart", "head", "life"] as const) {
      const m = await sharp(res.results!.masks![line]).metadata();
      expect([m.format, m.channels, m.width, m.height]).toEqual(["png", 1, 160, 120]);
      expect(typeof res.results!.stats![line]!.pixels).toBe("bigint");
    }
  });

  it("rejects an empty image with InvalidArgument missing_image and a BadRequest", async () => {
    const { palm } = createInMemoryService({ analyzer, store });
    const err = await catchError(palm.analyze({}, { headers }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.findDetails(ErrorInfoSchema)[0].reason).toBe("missing_image");
    expect(err.findDetails(BadRequestSchema)[0].fieldViolations[0].field).toBe("image");
  });

  it("rejects an image over 5 MiB with ResourceExhausted image_too_large", async () => {
    const { palm } = createInMemoryService({ analyzer, store });
    const err = await catchError(palm.analyze({ image: new Uint8Array(5 * 1024 * 1024 + 1) }, { headers }));
    expect([err.code, err.findDetails(ErrorInfoSchema)[0].reason]).toEqual([Code.ResourceExhausted, "image_too_large"]);
  });

  it("answers DeadlineExceeded timeout when the configured analyze deadline passes", async () => {
    const { palm } = createInMemoryService({ analyzer, store, config: { analyzeTimeoutMs: 1 } });
    const err = await catchError(palm.analyze({ image }, { headers }));
    expect([err.code, err.findDetails(ErrorInfoSchema)[0].reason]).toEqual([Code.DeadlineExceeded, "timeout"]);
  });

  it("maps an engine fault to Internal internal_error with a generic message", async () => {
    const { palm } = createInMemoryService({ analyzer: createFailingAnalyzer("m", new RangeError("tensor shape [1,3]")), store });
    const err = await catchError(palm.analyze({ image }, { headers }));
    expect([err.code, err.rawMessage]).toEqual([Code.Internal, "An internal error occurred."]);
  });
});
