/**
 * Lean answers (SPEC.md section 9): `images` (all | overlay | masks | none) and
 * `max_overlay_side`, in the REST query (every body form), in the JSON body and in the proto
 * over Connect and gRPC; against a real server and the real engine. An answer without images
 * keeps every number of the full one; a bad option is refused and not charged.
 */
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PalmService } from "../../gen/palm/v1/palm_pb.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import type { StageTimings } from "../../src/inference/pipeline.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { makeHandPhoto, makeImage } from "../helpers/images.js";
import { registerKey } from "../helpers/keys.js";
import { expectErrorBody, postAnalyze } from "../helpers/rest.js";
import { startKeyedServer, type KeyedTestServer } from "../helpers/server.js";

let analyzer: EngineAnalyzer;
let srv: KeyedTestServer;
let jpeg: Buffer;
/** The engine's stage timings of every analysis, in order. */
const timings: StageTimings[] = [];

beforeAll(async () => {
  [analyzer, jpeg] = await Promise.all([createTestAnalyzer({ onTimings: (t) => timings.push(t) }), makeImage(400, 300, "jpeg")]);
  srv = await startKeyedServer({ analyzer, client: "acme", plan: "pro" });
});
afterAll(async () => {
  await srv?.close();
  await analyzer?.close();
});

async function upload(query: string, body: Buffer, key = srv.key): Promise<{ res: Response; text: string; json: any }> {
  const res = await fetch(`${srv.url}/v1/palm/analyze${query}`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": "image/jpeg" },
    body: new Uint8Array(body),
  });
  const text = await res.text();
  return { res, text, json: JSON.parse(text) };
}

const sizeOf = async (b64: string) => {
  const m = await sharp(Buffer.from(b64, "base64")).metadata();
  return [m.width, m.height];
};

describe("lean answers on POST /v1/palm/analyze", () => {
  it("answers a 12 MP photo without images in under 20 KB, with every number of the full answer, never decoding it at full size", async () => {
    const photo = await makeHandPhoto(); // 3024 x 4032
    const full = await upload("", photo);
    const fullTimings = timings.at(-1)!;
    const lean = await upload("?images=none", photo);
    const leanTimings = timings.at(-1)!;
    expect(full.res.status).toBe(200);
    expect(lean.res.status).toBe(200);
    expect(full.json.results.reason).toBe("");
    expect(lean.json.results.stats).toEqual(full.json.results.stats);
    expect(lean.json.results.hand).toEqual(full.json.results.hand);
    expect(lean.json.results.overlay).toBe("");
    expect(lean.json.results.masks).toEqual({ heart: "", head: "", life: "" });
    expect(Buffer.byteLength(lean.text)).toBeLessThan(20 * 1024);
    expect(Buffer.byteLength(full.text)).toBeGreaterThan(20 * Buffer.byteLength(lean.text));
    // The lean answer never decodes the photo at full size; the full one does, for its overlay.
    expect(leanTimings.decode).toBeGreaterThan(0);
    expect(leanTimings.fullDecode).toBe(0);
    expect(fullTimings.fullDecode).toBeGreaterThan(0);
  });

  it("gives only the masks, or only an overlay scaled down to max_overlay_side, as asked in the query", async () => {
    const masks = await upload("?images=masks", jpeg);
    expect(masks.json.results.overlay).toBe("");
    expect(await sizeOf(masks.json.results.masks.life)).toEqual([400, 300]);

    const overlay = await upload("?images=overlay&max_overlay_side=200", jpeg);
    expect(await sizeOf(overlay.json.results.overlay)).toEqual([200, 150]);
    expect(overlay.json.results.masks.heart).toBe("");
    // Never scaled up; "all" is the default.
    const all = await upload("?images=all&max_overlay_side=4000", jpeg);
    expect(await sizeOf(all.json.results.overlay)).toEqual([400, 300]);
    expect(await sizeOf(all.json.results.masks.head)).toEqual([400, 300]);
  });

  it("takes the options as JSON body fields and as a multipart upload's query", async () => {
    const { json } = await postAnalyze(
      srv.url,
      { image: jpeg.toString("base64"), images: "overlay", max_overlay_side: 100 },
      { "x-api-key": srv.key },
    );
    expect(await sizeOf(json.results.overlay)).toEqual([100, 75]);
    expect(json.results.masks.life).toBe("");

    const fd = new FormData();
    fd.append("image", new Blob([new Uint8Array(jpeg)]), "palm.jpg");
    const res = await fetch(`${srv.url}/v1/palm/analyze?images=none`, { method: "POST", headers: { "x-api-key": srv.key }, body: fd });
    const lean = await res.json();
    expect(lean.results.overlay).toBe("");
    expect(lean.results.masks.head).toBe("");
  });

  it.each([
    ["Connect", () => createConnectTransport({ baseUrl: srv.url, httpVersion: "1.1" })],
    ["gRPC", () => createGrpcTransport({ baseUrl: srv.url })],
  ])("takes the options as AnalyzeRequest fields over %s", async (_, transport) => {
    const client = createClient(PalmService, transport());
    const res = await client.analyze({ image: jpeg, images: "overlay", maxOverlaySide: 80 }, { headers: { "x-api-key": srv.key } });
    const m = await sharp(res.results!.overlay).metadata();
    expect([m.width, m.height]).toEqual([80, 60]);
    expect(res.results!.masks!.heart.byteLength).toBe(0);
  });

  it.each([
    ["?images=thumbnails", "images"],
    ["?images=NONE", "images"],
    ["?max_overlay_side=-1", "max_overlay_side"],
    ["?max_overlay_side=12px", "max_overlay_side"],
    ["?maxOverlaySide=99999999999", "max_overlay_side"],
  ])("answers %s with 400 invalid_option, uncharged", async (query, field) => {
    const client = `c${Math.random().toString(36).slice(2)}`;
    const key = await registerKey(srv.store, client, "free");
    const { res, json } = await upload(query, jpeg, key);
    expectErrorBody(res, json, 400, "invalid_option");
    expect(json.error.message).toContain(field);
    expect(res.headers.get("x-monthly-quota-remaining")).toBe("100");
    expect(await srv.store.usage(client, quotaPeriodOf())).toBe(0);
  });

  it("ignores query parameters that name no option", async () => {
    const { res } = await upload("?utm_source=app&image=abc", jpeg);
    expect(res.status).toBe(200);
  });
});
