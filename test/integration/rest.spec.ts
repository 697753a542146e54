/**
 * The REST surface against SPEC.md sections 2, 3 and 6: a real server, a real Redis, the real
 * engine and model. Every error case also checks that the client's quota is untouched.
 */
import http2 from "node:http2";
import sharp from "sharp";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { generateApiKey, hashApiKey } from "../../src/auth/api-key.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { makeImage } from "../helpers/images.js";
import { registerKey } from "../helpers/keys.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { expectErrorBody, postAnalyze, postExpectingContinue, rawRequest } from "../helpers/rest.js";
import { startServer, type TestServer } from "../helpers/server.js";

let redis: RedisProcess;
let analyzer: EngineAnalyzer;
let jpeg: Buffer;
let png: Buffer;

beforeAll(async () => {
  [redis, analyzer, jpeg, png] = await Promise.all([
    startRedis(),
    createTestAnalyzer(),
    makeImage(256, 192, "jpeg"),
    makeImage(200, 160, "png"),
  ]);
});
afterAll(async () => {
  await analyzer?.close();
  await redis?.stop();
});

let store: RedisStore;
let srv: TestServer;
let key: string;
const period = () => quotaPeriodOf();
const used = () => store.usage("acme", period());

beforeEach(async () => {
  store = createRedisStore({ url: redis.url, keyPrefix: uniquePrefix() });
  await store.ready(5000);
  srv = await startServer({ analyzer, store });
  key = await registerKey(store, "acme", "free");
});
afterEach(async () => {
  await srv.close();
  await store.close();
});

const b64 = (b: Buffer) => b.toString("base64");

describe("POST /v1/palm/analyze", () => {
  it("answers 200 with every field, type and header of SPEC.md section 3", async () => {
    const before = Math.floor(Date.now() / 1000);
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) }, { "x-api-key": key });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("application/json");

    // Top level: exactly these names, snake_case, integers as JSON numbers.
    expect(Object.keys(json).sort()).toEqual(["created", "id", "model", "object", "results", "usage"]);
    expect(json.id).toMatch(/^palm_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(res.headers.get("x-request-id")).toBe(json.id);
    expect(json.object).toBe("palm.analysis");
    expect(Number.isInteger(json.created)).toBe(true);
    expect(json.created).toBeGreaterThanOrEqual(before);
    expect(json.created).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    expect(json.model).toBe(analyzer.model);
    expect(json.model).toMatch(/^palm-lines-/);

    // A picture without a hand: no `hand`, and the reason why no line is reported.
    expect(Object.keys(json.results).sort()).toEqual(["masks", "overlay", "reason", "stats"]);
    expect(json.results.reason).toBe("no_hand");
    const overlay = await sharp(Buffer.from(json.results.overlay, "base64")).metadata();
    expect({ format: overlay.format, width: overlay.width, height: overlay.height }).toEqual({ format: "jpeg", width: 256, height: 192 });
    for (const line of ["heart", "head", "life"] as const) {
      const mask = Buffer.from(json.results.masks[line], "base64");
      const { data, info } = await sharp(mask).raw().toBuffer({ resolveWithObject: true });
      const meta = await sharp(mask).metadata();
      expect({ format: meta.format, channels: meta.channels, width: info.width, height: info.height }).toEqual({
        format: "png",
        channels: 1,
        width: 256,
        height: 192,
      });
      let on = 0;
      let other = 0;
      for (const v of data) {
        if (v === 255) on++;
        else if (v !== 0) other++;
      }
      expect(other).toBe(0);
      const s = json.results.stats[line];
      expect(Object.keys(s).sort()).toEqual(["confidence", "coverage", "detected", "length", "pixels", "polyline", "reason"]);
      expect(s.polyline).toEqual([]); // no line found: no course, no length, and the answer's reason
      expect(s.reason).toBe(json.results.reason);
      expect(s.length).toBe(0);
      expect(Number.isInteger(s.pixels)).toBe(true);
      expect(s.pixels).toBe(on);
      expect(typeof s.confidence).toBe("number");
      expect(s.confidence).toBeGreaterThanOrEqual(0);
      expect(s.confidence).toBeLessThanOrEqual(1);
      expect(typeof s.coverage).toBe("number");
      expect(s.coverage).toBeGreaterThanOrEqual(0);
      expect(s.coverage).toBeLessThanOrEqual(100);
      expect(Math.round(s.coverage * 100) / 100).toBe(s.coverage);
      expect(typeof s.detected).toBe("boolean");
    }
    expect(Object.keys(json.results.masks).sort()).toEqual(["head", "heart", "life"]);
    expect(Object.keys(json.results.stats).sort()).toEqual(["head", "heart", "life"]);

    const reset = period().resetsAt;
    expect(json.usage).toEqual({ requests_used: 1, requests_limit: 100, plan: "free", resets_at: reset });
    expect(res.headers.get("x-monthly-quota-limit")).toBe("100");
    expect(res.headers.get("x-monthly-quota-remaining")).toBe("99");
    expect(res.headers.get("x-monthly-quota-reset")).toBe(String(reset));
    expect(await used()).toBe(1);
  });

  it("accepts a PNG with a data-URL prefix, line breaks, URL-safe alphabet without padding, a charset and unknown fields", async () => {
    const urlSafe = b64(png).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const wrapped = urlSafe.replace(/(.{76})/g, "$1\r\n ");
    const { res, json } = await postAnalyze(
      srv.url,
      { image: `data:image/png;base64,${wrapped}`, future_field: { nested: [1, 2] } },
      { "x-api-key": key, "content-type": "application/json; charset=utf-8" },
    );
    expect(res.status).toBe(200);
    expect(json.usage.requests_used).toBe(1);
    const overlay = await sharp(Buffer.from(json.results.overlay, "base64")).metadata();
    expect([overlay.width, overlay.height]).toEqual([200, 160]);
  });

  it("gives every request its own id", async () => {
    const a = await postAnalyze(srv.url, {}, { "x-api-key": key });
    const b = await postAnalyze(srv.url, {}, { "x-api-key": key });
    expect(a.json.error.request_id).not.toBe(b.json.error.request_id);
  });
});

describe("POST /v1/palm/analyze errors (SPEC.md section 6), each leaving the quota untouched", () => {
  /** After an error of a recognised key: headers present and nothing charged. */
  async function expectQuotaUntouched(res: Response) {
    expect(res.headers.get("x-monthly-quota-limit")).toBe("100");
    expect(res.headers.get("x-monthly-quota-remaining")).toBe("100");
    expect(res.headers.get("x-monthly-quota-reset")).toBe(String(period().resetsAt));
    expect(await used()).toBe(0);
  }

  it("answers 401 missing_api_key without a key, with no quota headers", async () => {
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) });
    expectErrorBody(res, json, 401, "missing_api_key");
    expect(res.headers.get("x-monthly-quota-remaining")).toBeNull();
    expect(await used()).toBe(0);
  });

  it.each([
    ["uppercase hex", () => key.toUpperCase().replace("PALM_LIVE_", "palm_live_")],
    ["a short key", () => key.slice(0, -1)],
    ["a test-mode prefix", () => key.replace("palm_live_", "palm_test_")],
    ["an unknown well-formed key", () => generateApiKey()],
  ])("answers 401 invalid_api_key for %s", async (_, k) => {
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) }, { "x-api-key": k() });
    expectErrorBody(res, json, 401, "invalid_api_key");
    expect(res.headers.get("x-monthly-quota-remaining")).toBeNull();
    expect(await used()).toBe(0);
  });

  it("answers 401 invalid_api_key for a revoked key", async () => {
    await store.revokeKey(hashApiKey(key));
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) }, { "x-api-key": key });
    expectErrorBody(res, json, 401, "invalid_api_key");
    expect(await used()).toBe(0);
  });

  it("checks the key from the headers before reading the body", async () => {
    // The body never finishes: only a check made before reading it can answer.
    const r = await rawRequest({
      port: srv.port,
      headers: { "content-type": "application/json", "x-api-key": generateApiKey(), "content-length": String(1 << 20) },
      chunk: Buffer.from('{"image":"'),
      totalBytes: 10,
      end: false,
    });
    expect(r.status).toBe(401);
    expect(JSON.parse(r.body).error.code).toBe("invalid_api_key");
  });

  it.each([["text/plain"], ["image/gif"], ["application/jsonp"]])("answers 415 unsupported_media_type for Content-Type %s", async (ct) => {
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) }, { "x-api-key": key, "content-type": ct });
    expectErrorBody(res, json, 415, "unsupported_media_type");
    await expectQuotaUntouched(res);
  });

  it.each([
    ["an empty body", ""],
    ["a JSON array", "[1,2,3]"],
    ["a JSON string", '"abc"'],
    ["null", "null"],
    ["broken JSON", '{"image": '],
    ["arrays nested 10,000 deep", "[".repeat(10_000) + "]".repeat(10_000)],
    ["image as a number", '{"image": 12345}'],
    ["image as an object", '{"image": {"data": "abc"}}'],
    ["image as a boolean", '{"image": true}'],
    ["invalid UTF-8", Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x7d]).toString("latin1")],
  ])("answers 400 invalid_json for %s", async (_, body) => {
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(res, json, 400, "invalid_json");
    await expectQuotaUntouched(res);
  });

  it.each([
    ["no image field", {}],
    ["an empty image", { image: "" }],
    ["a null image", { image: null }],
    ["whitespace only", { image: " \n " }],
    ["a bare data-URL prefix", { image: "data:image/jpeg;base64," }],
    ["only an unknown field nested 10,000 deep", `${'{"a":'.repeat(10_000)}1${"}".repeat(10_000)}`],
  ])("answers 400 missing_image for %s", async (_, body) => {
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    expectErrorBody(res, json, 400, "missing_image");
    await expectQuotaUntouched(res);
  });

  it.each([
    ["invalid characters", "abc$def!"],
    ["a single trailing character", "abcde"],
    ["padding in the middle", "ab==cd"],
  ])("answers 400 invalid_base64 for %s", async (_, image) => {
    const { res, json } = await postAnalyze(srv.url, { image }, { "x-api-key": key });
    expectErrorBody(res, json, 400, "invalid_base64");
    await expectQuotaUntouched(res);
  });

  it("answers 413 image_too_large for a decoded image over 5 MiB", async () => {
    const big = Buffer.alloc(5 * 1024 * 1024 + 1, 0x41);
    jpeg.copy(big, 0, 0, 4);
    const { res, json } = await postAnalyze(srv.url, { image: b64(big) }, { "x-api-key": key });
    expectErrorBody(res, json, 413, "image_too_large");
    await expectQuotaUntouched(res);
  });

  it("answers 413 image_too_large for a declared body over 8 MiB without reading it", async () => {
    const r = await rawRequest({
      port: srv.port,
      headers: { "content-type": "application/json", "x-api-key": key, "content-length": String(9 * 1024 * 1024) },
      chunk: Buffer.alloc(64 * 1024, 0x41),
      totalBytes: 256 * 1024,
      end: false,
    });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("image_too_large");
    expect(r.headers["x-monthly-quota-remaining"]).toBe("100");
    expect(await used()).toBe(0);
  });

  it("answers 413 image_too_large once a chunked body passes 8 MiB, before the client finishes", async () => {
    const total = 64 * 1024 * 1024;
    const r = await rawRequest({
      port: srv.port,
      headers: { "content-type": "application/json", "x-api-key": key, "transfer-encoding": "chunked" },
      chunk: Buffer.alloc(256 * 1024, 0x41),
      totalBytes: total,
    });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("image_too_large");
    expect(r.written).toBeLessThan(total);
    expect(await used()).toBe(0);
  });

  it("answers 400 unsupported_image_format for a GIF", async () => {
    const gif = await sharp({ create: { width: 100, height: 100, channels: 3, background: "#a86" } })
      .gif()
      .toBuffer();
    const { res, json } = await postAnalyze(srv.url, { image: b64(gif) }, { "x-api-key": key });
    expectErrorBody(res, json, 400, "unsupported_image_format");
    await expectQuotaUntouched(res);
  });

  it("answers 400 invalid_image for a truncated JPEG", async () => {
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg.subarray(0, 200)) }, { "x-api-key": key });
    expectErrorBody(res, json, 400, "invalid_image");
    await expectQuotaUntouched(res);
  });

  it("answers 400 image_dimensions_out_of_range for a 63x63 PNG", async () => {
    const small = await makeImage(63, 63, "png");
    const { res, json } = await postAnalyze(srv.url, { image: b64(small) }, { "x-api-key": key });
    expectErrorBody(res, json, 400, "image_dimensions_out_of_range");
    await expectQuotaUntouched(res);
  });

  it("answers 504 timeout when the body does not arrive in time", async () => {
    await srv.close();
    srv = await startServer({ analyzer, store, config: { bodyTimeoutMs: 300 } });
    const r = await rawRequest({
      port: srv.port,
      headers: { "content-type": "application/json", "x-api-key": key, "content-length": "1000" },
      chunk: Buffer.from('{"image":"'),
      totalBytes: 10,
      end: false,
    });
    expect(r.status).toBe(504);
    expect(JSON.parse(r.body).error.code).toBe("timeout");
    expect(r.headers["x-monthly-quota-remaining"]).toBe("100");
    expect(await used()).toBe(0);
  });

  it("holds more calls at once than Node's listener bound without warning of a memory leak", async () => {
    // Each call's signal is linked to the server's shutdown signal until the call ends: twelve at
    // once are twelve listeners on it, and Node would print "Possible EventTarget memory leak
    // detected" on the server's stderr at the eleventh.
    await srv.close();
    srv = await startServer({
      analyzer,
      store,
      config: { bodyTimeoutMs: 500, rateLimits: { free: { rate: 100, burst: 100, concurrency: 20 } } },
    });
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);
    process.on("warning", onWarning);
    try {
      const answers = await Promise.all(
        Array.from({ length: 12 }, () =>
          rawRequest({
            port: srv.port,
            headers: { "content-type": "application/json", "x-api-key": key, "content-length": "1000" },
            chunk: Buffer.from('{"image":"'),
            totalBytes: 10,
            end: false,
          }),
        ),
      );
      expect(answers.map((r) => r.status)).toEqual(Array(12).fill(504));
      await new Promise((r) => setImmediate(r));
    } finally {
      process.off("warning", onWarning);
    }
    expect(warnings.filter((w) => w.startsWith("MaxListenersExceededWarning"))).toEqual([]);
    expect(await used()).toBe(0);
  });

  it("answers 504 timeout when the analysis passes the configured deadline", async () => {
    await srv.close();
    srv = await startServer({ analyzer, store, config: { analyzeTimeoutMs: 1 } });
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) }, { "x-api-key": key });
    expectErrorBody(res, json, 504, "timeout");
    await expectQuotaUntouched(res);
  });
});

describe("order of checks (docs/design.md)", () => {
  it("answers a client out of quota 429 even when its Content-Type or body is malformed, and charges nothing", async () => {
    await srv.close();
    srv = await startServer({ analyzer, store, config: { planLimits: { free: 1, starter: 1000, pro: 10000 } } });
    expect((await postAnalyze(srv.url, { image: b64(jpeg) }, { "x-api-key": key })).res.status).toBe(200);
    const malformed = await postAnalyze(srv.url, "{not json", { "x-api-key": key });
    expect(malformed.res.status).toBe(429);
    expect(malformed.json.error.code).toBe("quota_exceeded");
    const wrongType = await fetch(`${srv.url}/v1/palm/analyze`, {
      method: "POST",
      headers: { "content-type": "text/plain", "x-api-key": key },
      body: "hello",
    });
    expect(wrongType.status).toBe(429);
    expect(await used()).toBe(1);
  });
});

describe("REST transport details", () => {
  it("sends 100 Continue only after the key check, so a refused client never uploads its body", async () => {
    const body = JSON.stringify({ image: b64(jpeg) });
    const attempt = (apiKey: string) =>
      postExpectingContinue(srv.port, "/v1/palm/analyze", { "content-type": "application/json", "x-api-key": apiKey }, body);
    expect(await attempt(generateApiKey())).toEqual({ status: 401, continued: false });
    expect(await attempt(key)).toEqual({ status: 200, continued: true });
  });

  it("serves REST over HTTP/2 cleartext on the same port", async () => {
    const session = http2.connect(srv.url);
    try {
      const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const stream = session.request({
          ":method": "POST",
          ":path": "/v1/palm/analyze",
          "content-type": "application/json",
          "x-api-key": key,
        });
        let status = 0;
        let body = "";
        stream.on("response", (h) => (status = Number(h[":status"])));
        stream.setEncoding("utf8");
        stream.on("data", (d) => (body += d));
        stream.on("end", () => resolve({ status, body }));
        stream.on("error", reject);
        stream.end(JSON.stringify({ image: b64(png) }));
      });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body).object).toBe("palm.analysis");
    } finally {
      session.close();
    }
  });
});

describe("REST routing", () => {
  it("answers 404 not_found for an unknown path", async () => {
    const res = await fetch(`${srv.url}/v1/palm/unknown`, { method: "POST", headers: { "x-api-key": key } });
    expectErrorBody(res, await res.json(), 404, "not_found");
  });

  it("answers 405 method_not_allowed with Allow for a wrong method", async () => {
    const res = await fetch(`${srv.url}/v1/palm/analyze`, { headers: { "x-api-key": key } });
    expectErrorBody(res, await res.json(), 405, "method_not_allowed");
    expect(res.headers.get("allow")).toBe("POST");
    const res2 = await fetch(`${srv.url}/v1/palm/health`, { method: "DELETE" });
    expectErrorBody(res2, await res2.json(), 405, "method_not_allowed");
    expect(res2.headers.get("allow")).toBe("GET");
  });

  it('answers GET /v1/palm/health with {"status":"ok"} without a key', async () => {
    const res = await fetch(`${srv.url}/v1/palm/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
    expect(res.headers.get("x-request-id")).toMatch(/^palm_/);
  });
});
