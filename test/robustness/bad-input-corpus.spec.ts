/**
 * The bad-input corpus of issue 4 against a real server over real HTTP (a real Redis, the real
 * engine and model): every case expects its exact HTTP status and SPEC.md section 6 `code`, and
 * the client's monthly usage in Redis must move only for the cases that answer 200. Inputs are
 * generated here (sharp for real images, hand-made bytes for headers and bombs). After the
 * corpus the server must still answer health and its memory must be back within bounds.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { crc32, deflateSync } from "node:zlib";
import sharp, { type Sharp } from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { makeImage } from "../helpers/images.js";
import { statusBytes, sumOver } from "../helpers/proc.js";
import { registerKey } from "../helpers/keys.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { expectErrorBody, postAnalyze, rawRequest } from "../helpers/rest.js";
import { startServer, type TestServer } from "../helpers/server.js";

let redis: RedisProcess;
let analyzer: EngineAnalyzer;
let store: RedisStore;
let srv: TestServer;
let key: string;
let jpeg: Buffer;
let png: Buffer;
/** Successful analyses so far: the only thing allowed to move the client's usage. */
let charged = 0;
/** Memory of this process (server + engine workers live in it) after the warm-up requests. */
let baseline: NodeJS.MemoryUsage;

const b64 = (b: Uint8Array) => Buffer.from(b).toString("base64");
const usage = () => store.usage("acme", quotaPeriodOf());

beforeAll(async () => {
  [redis, analyzer, jpeg, png] = await Promise.all([
    startRedis(),
    createTestAnalyzer(),
    makeImage(160, 120, "jpeg"),
    makeImage(160, 120, "png"),
  ]);
  store = createRedisStore({ url: redis.url, keyPrefix: uniquePrefix() });
  await store.ready(5000);
  srv = await startServer({ analyzer, store });
  key = await registerKey(store, "acme", "pro");
  // Warm-up: a few real analyses, so the baseline includes the native allocators' working set
  // (each engine thread's malloc arena grows over the first analyses, then plateaus).
  for (let i = 0; i < 4; i++) {
    const { res } = await postAnalyze(srv.url, { image: b64(i % 2 ? png : jpeg) }, { "x-api-key": key });
    expect(res.status).toBe(200);
    charged++;
  }
  collectGarbage();
  baseline = memory();
});

/** memory is this process's memory, with the RSS of the analyzer's worker processes added. */
function memory(): NodeJS.MemoryUsage {
  const usage = process.memoryUsage();
  return { ...usage, rss: usage.rss + sumOver(analyzer.workerPids(), (pid) => statusBytes(pid, "VmRSS")) };
}
afterAll(async () => {
  await srv?.close();
  await store?.close();
  await analyzer?.close();
  await redis?.stop();
});

// ---------------------------------------------------------------------------------------------
// Input makers

/** pngChunk builds one PNG chunk with its CRC (node:zlib crc32). */
function pngChunk(type: string, data: Uint8Array): Buffer {
  const body = Buffer.concat([Buffer.from(type, "ascii"), data]);
  const out = Buffer.alloc(8 + data.byteLength + 4);
  out.writeUInt32BE(data.byteLength, 0);
  body.copy(out, 4);
  out.writeUInt32BE(crc32(body), 8 + data.byteLength);
  return out;
}

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * headerOnlyPng is a well-formed tiny PNG declaring width x height RGB pixels whose IDAT holds
 * only a few deflated zero rows: a decompression bomb if anyone decoded it before checking.
 */
function headerOnlyPng(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const idat = deflateSync(Buffer.alloc(4096));
  return Buffer.concat([PNG_SIGNATURE, pngChunk("IHDR", ihdr), pngChunk("IDAT", idat), pngChunk("IEND", new Uint8Array(0))]);
}

/** withCorruptIdatCrc flips the CRC of the first IDAT chunk of a PNG. */
function withCorruptIdatCrc(file: Buffer): Buffer {
  const out = Buffer.from(file);
  let at = 8;
  while (at < out.byteLength) {
    const len = out.readUInt32BE(at);
    if (out.toString("ascii", at + 4, at + 8) === "IDAT") {
      out[at + 8 + len] ^= 0xff;
      return out;
    }
    at += 12 + len;
  }
  throw new Error("no IDAT chunk");
}

/** withJpegSize rewrites the frame size in a JPEG's SOF marker (the pixels stay as they were). */
function withJpegSize(file: Buffer, width: number, height: number): Buffer {
  const out = Buffer.from(file);
  let at = 2;
  while (at < out.byteLength) {
    const marker = out[at + 1];
    const len = out.readUInt16BE(at + 2);
    if (marker >= 0xc0 && marker <= 0xc2) {
      out.writeUInt16BE(height, at + 5);
      out.writeUInt16BE(width, at + 7);
      return out;
    }
    at += 2 + len;
  }
  throw new Error("no SOF marker");
}

/** rgb renders raw RGB pixels from a colour function. */
function rgb(width: number, height: number, colour: (x: number, y: number) => readonly number[]): Sharp {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) raw.set(colour(x, y), (y * width + x) * 3);
  }
  return sharp(raw, { raw: { width, height, channels: 3 } });
}

/** A warm beige with a soft gradient: photo-like, no palm. */
const beige = (x: number, y: number) => [(190 + (x * 40) / 400) | 0, (150 + (y * 40) / 400) | 0, 120];

// The displayed (upright) orientation test picture: 160 x 96, red block in the top-left corner.
const UPRIGHT = { width: 160, height: 96 };
const RED = { w: 48, h: 32 };
const upright = (x: number, y: number) => (x < RED.w && y < RED.h ? [220, 20, 20] : [150, 150, 150]);

/**
 * storedFor maps a displayed pixel (x, y) to the stored pixel for EXIF orientation `o` (the
 * stored image is what, transformed as the tag says, displays as UPRIGHT). W/H are the displayed
 * size; the stored image is H x W for orientations 5-8.
 */
function storedFor(o: number, x: number, y: number, W: number, H: number): [number, number] {
  switch (o) {
    case 1:
      return [x, y];
    case 2:
      return [W - 1 - x, y]; // mirror horizontal
    case 3:
      return [W - 1 - x, H - 1 - y]; // rotate 180
    case 4:
      return [x, H - 1 - y]; // mirror vertical
    case 5:
      return [y, x]; // transpose
    case 6:
      return [y, W - 1 - x]; // displayed = stored rotated 90° clockwise
    case 7:
      return [H - 1 - y, W - 1 - x]; // transverse
    case 8:
      return [H - 1 - y, x]; // displayed = stored rotated 90° counter-clockwise
    default:
      throw new Error(`orientation ${o}`);
  }
}

/** orientedJpeg stores UPRIGHT so that EXIF orientation `o` displays it upright. */
async function orientedJpeg(o: number): Promise<Buffer> {
  const { width: W, height: H } = UPRIGHT;
  const [sw, sh] = o >= 5 ? [H, W] : [W, H];
  const raw = Buffer.alloc(sw * sh * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const [sx, sy] = storedFor(o, x, y, W, H);
      raw.set(upright(x, y), (sy * sw + sx) * 3);
    }
  }
  return sharp(raw, { raw: { width: sw, height: sh, channels: 3 } })
    .jpeg({ quality: 95 })
    .withMetadata({ orientation: o })
    .toBuffer();
}

/** meanColour of a w x h block at (x, y) of a decoded RGB image. */
function meanColour(img: { data: Buffer; width: number }, x0: number, y0: number, w: number, h: number): number[] {
  const sum = [0, 0, 0];
  for (let y = y0; y < y0 + h; y++) {
    for (let x = x0; x < x0 + w; x++) for (let c = 0; c < 3; c++) sum[c] += img.data[(y * img.width + x) * 3 + c];
  }
  return sum.map((s) => s / (w * h));
}

/** collectGarbage runs a full V8 GC of this isolate (exposing gc() at run time). */
function collectGarbage(): void {
  setFlagsFromString("--expose_gc");
  (runInNewContext("gc") as () => void)();
}

const isRed = ([r, g, b]: number[]) => r > 170 && g < 80 && b < 80;

// ---------------------------------------------------------------------------------------------
// Assertions shared by every case

/** expectRefusedUntouched: exact status/code, quota headers unchanged (when the key was known), usage unchanged. */
async function expectRefused(res: Response, json: any, status: number, code: string, keyRecognised = true): Promise<void> {
  expectErrorBody(res, json, status, code);
  if (keyRecognised && status !== 404 && status !== 405) {
    expect(res.headers.get("x-monthly-quota-remaining")).toBe(String(10_000 - charged));
  }
  expect(await usage()).toBe(charged);
}

/** expectAnalysed: 200, charged exactly once, overlay and masks at the displayed size. */
async function expectAnalysed(res: Response, json: any, width: number, height: number): Promise<void> {
  expect(res.status, JSON.stringify(json?.error)).toBe(200);
  charged++;
  expect(json.usage.requests_used).toBe(charged);
  expect(await usage()).toBe(charged);
  const overlay = await sharp(Buffer.from(json.results.overlay, "base64")).metadata();
  expect([overlay.format, overlay.width, overlay.height]).toEqual(["jpeg", width, height]);
  for (const line of ["heart", "head", "life"]) {
    const mask = await sharp(Buffer.from(json.results.masks[line], "base64")).metadata();
    expect([mask.format, mask.width, mask.height]).toEqual(["png", width, height]);
  }
}

async function analyze(image: Uint8Array | string, headers: Record<string, string> = {}) {
  return postAnalyze(srv.url, { image: typeof image === "string" ? image : b64(image) }, { "x-api-key": key, ...headers });
}

// ---------------------------------------------------------------------------------------------

describe("bad-input corpus: malformed requests", () => {
  it.each([
    ["an empty body", ""],
    ["a JSON array", '[{"image":"AAAA"}]'],
    ["a JSON array nested 10,000 deep", "[".repeat(10_000) + "]".repeat(10_000)],
    ["image nested 10,000 deep in arrays", `{"image":${"[".repeat(10_000)}${"]".repeat(10_000)}}`],
    ["image as a number", '{"image": 42}'],
    ["image as an object", '{"image": {"base64": "AAAA"}}'],
    ["truncated JSON", '{"image": "/9j/'],
  ])("answers 400 invalid_json for %s", async (_, body) => {
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    await expectRefused(res, json, 400, "invalid_json");
  });

  it.each([
    ["image null", { image: null }],
    ["no image field", { picture: "AAAA" }],
    ["an empty image string", { image: "" }],
  ])("answers 400 missing_image for %s", async (_, body) => {
    const { res, json } = await postAnalyze(srv.url, body, { "x-api-key": key });
    await expectRefused(res, json, 400, "missing_image");
  });

  it("answers 400 invalid_base64 for base64 with invalid characters", async () => {
    const { res, json } = await analyze(`${b64(jpeg).slice(0, 40)}*&%$${b64(jpeg).slice(40)}`);
    await expectRefused(res, json, 400, "invalid_base64");
  });

  it("answers 415 unsupported_media_type for Content-Type text/plain", async () => {
    const { res, json } = await analyze(jpeg, { "content-type": "text/plain" });
    await expectRefused(res, json, 415, "unsupported_media_type");
  });

  it("answers 401 invalid_api_key for a key in uppercase hex, charging nobody", async () => {
    const upper = `palm_live_${key.slice("palm_live_".length).toUpperCase()}`;
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) }, { "x-api-key": upper });
    await expectRefused(res, json, 401, "invalid_api_key", false);
    expect(res.headers.get("x-monthly-quota-remaining")).toBeNull();
  });

  it("answers 401 missing_api_key without a key", async () => {
    const { res, json } = await postAnalyze(srv.url, { image: b64(jpeg) });
    await expectRefused(res, json, 401, "missing_api_key", false);
  });

  it("answers 405 method_not_allowed with Allow: POST for GET /v1/palm/analyze", async () => {
    const res = await fetch(`${srv.url}/v1/palm/analyze`, { headers: { "x-api-key": key } });
    await expectRefused(res, await res.json(), 405, "method_not_allowed");
    expect(res.headers.get("allow")).toBe("POST");
  });

  it("answers 404 not_found for an unknown path", async () => {
    const res = await fetch(`${srv.url}/v1/palm/analyse`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ image: b64(jpeg) }),
    });
    await expectRefused(res, await res.json(), 404, "not_found");
  });

  it("answers 413 image_too_large for a decoded image over 5 MiB", async () => {
    const big = Buffer.alloc(5 * 1024 * 1024 + 16);
    jpeg.copy(big);
    const { res, json } = await analyze(big);
    await expectRefused(res, json, 413, "image_too_large");
  });

  it("answers 413 image_too_large to a huge base64 body sent slowly, without reading it all, in bounded time", async () => {
    // 40 MiB of base64 in 128 KiB chunks every 10 ms, chunked (no Content-Length to refuse it by):
    // the server must stop at 8 MiB, i.e. after ~64 chunks, not wait for all 320 (3.2 s+).
    const total = 40 * 1024 * 1024;
    const started = Date.now();
    const r = await rawRequest({
      port: srv.port,
      headers: { "content-type": "application/json", "x-api-key": key, "transfer-encoding": "chunked" },
      chunk: Buffer.concat([Buffer.from('{"image":"'), Buffer.alloc(128 * 1024 - 10, "QUJD")]),
      totalBytes: total,
      intervalMs: 10,
    });
    const elapsed = Date.now() - started;
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("image_too_large");
    expect(r.headers["x-monthly-quota-remaining"]).toBe(String(10_000 - charged));
    expect(r.written).toBeLessThanOrEqual(12 * 1024 * 1024);
    expect(elapsed).toBeLessThan(5000);
    expect(await usage()).toBe(charged);
  });

  it("answers 413 image_too_large at once for a declared Content-Length over 8 MiB", async () => {
    const r = await rawRequest({
      port: srv.port,
      headers: { "content-type": "application/json", "x-api-key": key, "content-length": String(12 * 1024 * 1024) },
      chunk: Buffer.from('{"image":"QUJD'),
      totalBytes: 14,
      end: false,
    });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("image_too_large");
    expect(await usage()).toBe(charged);
  });
});

describe("bad-input corpus: files that are not a usable JPEG or PNG", () => {
  const heic = () =>
    Buffer.concat([
      Buffer.from([0, 0, 0, 0x18]),
      Buffer.from("ftypheic", "ascii"),
      Buffer.from([0, 0, 0, 0]),
      Buffer.from("mif1heic", "ascii"),
      Buffer.alloc(200, 7),
    ]);
  const svg = () =>
    Buffer.from(
      '<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" width="200" height="200"><rect width="200" height="200" fill="#c96"/></svg>',
    );
  const pdf = () => Buffer.from("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n");
  const text = () => Buffer.from("This is palm.jpg, but really a text file.\n".repeat(20));

  it.each([
    [
      "a GIF",
      () =>
        sharp({ create: { width: 120, height: 120, channels: 3, background: "#c96" } })
          .gif()
          .toBuffer(),
    ],
    [
      "a WebP",
      () =>
        sharp({ create: { width: 120, height: 120, channels: 3, background: "#c96" } })
          .webp()
          .toBuffer(),
    ],
    ["a HEIC (ftypheic box)", async () => heic()],
    ["an SVG", async () => svg()],
    ["a PDF", async () => pdf()],
    ["a text file renamed .jpg", async () => text()],
  ])("answers 400 unsupported_image_format for %s", async (_, make) => {
    const { res, json } = await analyze(await make());
    await expectRefused(res, json, 400, "unsupported_image_format");
  });

  it.each([
    ["a truncated JPEG", () => jpeg.subarray(0, Math.floor(jpeg.byteLength / 2))],
    ["a truncated PNG", () => png.subarray(0, Math.floor(png.byteLength / 2))],
    ["a PNG with a corrupt IDAT CRC", () => withCorruptIdatCrc(png)],
    ["JPEG magic bytes followed by garbage", () => Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(500, 0x5a)])],
    ["a PNG signature alone", () => PNG_SIGNATURE],
  ])("answers 400 invalid_image for %s", async (_, make) => {
    const { res, json } = await analyze(make());
    await expectRefused(res, json, 400, "invalid_image");
  });

  it.each([
    ["a decompression bomb: a tiny PNG declaring 60,000 x 60,000 pixels", async () => headerOnlyPng(60_000, 60_000)],
    ["a tiny PNG declaring 7,000 x 7,000 (49 MP, sides within limits)", async () => headerOnlyPng(7_000, 7_000)],
    ["a JPEG whose SOF declares 60,000 x 60,000", async () => withJpegSize(jpeg, 60_000, 60_000)],
    [
      "a 1x1 PNG",
      () =>
        sharp({ create: { width: 1, height: 1, channels: 3, background: "#c96" } })
          .png()
          .toBuffer(),
    ],
    ["a 63x63 JPEG", () => makeImage(63, 63, "jpeg")],
    ["a 64x63 PNG", () => makeImage(64, 63, "png")],
    [
      "a 10,001-pixel-wide PNG",
      () =>
        sharp({ create: { width: 10_001, height: 64, channels: 3, background: "#c96" } })
          .png()
          .toBuffer(),
    ],
  ])("answers 400 image_dimensions_out_of_range for %s", async (_, make) => {
    const file = await make();
    const started = Date.now();
    const { res, json } = await analyze(file);
    await expectRefused(res, json, 400, "image_dimensions_out_of_range");
    expect(Date.now() - started).toBeLessThan(3000); // refused from the header, no decode
  });
});

describe("bad-input corpus: unusual but valid inputs answer 200", () => {
  it("accepts the URL-safe base64 alphabet without padding", async () => {
    // Find an image whose base64 actually contains - and _ in URL-safe form.
    let img = jpeg;
    for (let q = 60; !/[+/]/.test(b64(img)); q++) img = await rgb(160, 120, beige).jpeg({ quality: q }).toBuffer();
    const urlSafe = b64(img).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    const { res, json } = await analyze(urlSafe);
    await expectAnalysed(res, json, 160, 120);
  });

  it("accepts Content-Type: application/json; charset=utf-8", async () => {
    const { res, json } = await analyze(jpeg, { "content-type": "application/json; charset=utf-8" });
    await expectAnalysed(res, json, 160, 120);
  });

  it("accepts a data-URL prefix", async () => {
    const { res, json } = await analyze(`data:image/png;base64,${b64(png)}`);
    await expectAnalysed(res, json, 160, 120);
  });

  it.each([
    ["a CMYK JPEG", () => rgb(200, 150, beige).toColourspace("cmyk").jpeg().toBuffer(), { space: "cmyk" }],
    ["a 16-bit PNG", () => rgb(200, 150, beige).toColourspace("rgb16").png().toBuffer(), { depth: "ushort" }],
    ["a greyscale JPEG", () => rgb(200, 150, beige).toColourspace("b-w").jpeg().toBuffer(), { channels: 1 }],
    ["a PNG with alpha", () => rgb(200, 150, beige).ensureAlpha(0.5).png().toBuffer(), { hasAlpha: true }],
    ["a progressive JPEG", () => rgb(200, 150, beige).jpeg({ progressive: true }).toBuffer(), { isProgressive: true }],
  ])("answers 200 for %s", async (_, make, property) => {
    const file = await make();
    expect(await sharp(file).metadata()).toMatchObject(property); // the input really is what it claims
    const { res, json } = await analyze(file);
    await expectAnalysed(res, json, 200, 150);
  });

  it.each([1, 2, 3, 4, 5, 6, 7, 8])("answers 200 upright for EXIF orientation %i", async (o) => {
    const file = await orientedJpeg(o);
    const meta = await sharp(file).metadata();
    expect(meta.orientation).toBe(o);
    const { res, json } = await analyze(file);
    await expectAnalysed(res, json, UPRIGHT.width, UPRIGHT.height);
    // Not mirrored, not rotated: the red block is in the top-left corner of the overlay only.
    const overlay = await sharp(Buffer.from(json.results.overlay, "base64")).raw().toBuffer({ resolveWithObject: true });
    const img = { data: overlay.data, width: overlay.info.width };
    const { width: W, height: H } = UPRIGHT;
    const m = 8; // stay clear of the block's edge and JPEG ringing
    const corner = (x: number, y: number) => meanColour(img, x, y, RED.w - 2 * m, RED.h - 2 * m);
    expect(isRed(corner(m, m)), "top-left is red").toBe(true);
    expect(isRed(corner(W - RED.w + m, m)), "top-right is not red").toBe(false);
    expect(isRed(corner(m, H - RED.h + m)), "bottom-left is not red").toBe(false);
    expect(isRed(corner(W - RED.w + m, H - RED.h + m)), "bottom-right is not red").toBe(false);
  });
});

describe("after the corpus", () => {
  it("is healthy, still analyses, has charged exactly the 200s, and its RSS is back within bounds", async () => {
    const health = await fetch(`${srv.url}/v1/palm/health`);
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    const { res, json } = await analyze(jpeg);
    await expectAnalysed(res, json, 160, 120);
    expect(analyzer.stats()).toMatchObject({ running: 0, queued: 0 });
    // Server and test code share this process; the engine runs in its worker process, whose RSS
    // is added to this process's. JS side (this process): after a full GC no
    // request body or image buffer is retained (the corpus moved ~80 MB of them). V8 frees
    // ArrayBuffer memory on a background thread after the GC, and sockets may still be flushing
    // the last answers: collect, let that settle, and measure again, a few times.
    let after = memory();
    for (let i = 0; i < 5; i++) {
      collectGarbage();
      await new Promise((r) => setTimeout(r, 100));
      after = memory();
      if (after.arrayBuffers < 16 * 2 ** 20) break;
    }
    const mib = (n: number) => `${(n / 2 ** 20).toFixed(0)} MiB`;
    const report = `rss ${mib(after.rss)} (baseline ${mib(baseline.rss)}), heap ${mib(after.heapUsed)} (baseline ${mib(baseline.heapUsed)}), arrayBuffers ${mib(after.arrayBuffers)}`;
    expect(after.heapUsed - baseline.heapUsed, report).toBeLessThan(32 * 2 ** 20);
    expect(after.arrayBuffers, report).toBeLessThan(16 * 2 ** 20);
    // Native side (sharp, onnxruntime, malloc arenas of the engine threads): bounded growth over
    // the warm baseline and far below the 1.5 GB budget of 16 concurrent 12 MP analyses. The
    // growth is memory the threads' allocators keep after the corpus, not a leak (heap and
    // ArrayBuffers are back at the baseline, above), and it depends on the machine and on how
    // the analyses overlapped: measured 274 MiB with this file alone and 399 MiB and 499 MiB in
    // the full suite on one VM (2026-11-23), where the earlier bound of 384 MiB failed the suite.
    expect(after.rss - baseline.rss, report).toBeLessThan(640 * 2 ** 20);
    expect(after.rss, report).toBeLessThan(1024 * 2 ** 20);
  });

  it("does not keep growing over repeated passes of analyses and refusals (no per-request leak)", async () => {
    // The bound above is loose because the allocators keep what the corpus made them grow. A
    // leak grows on every request instead: run the same mix three times (analyses two at a
    // time, one running and one queued) and compare the memory the first and the third pass
    // leave behind once settled. The allocators' own swing between passes was measured at up
    // to 45 MiB either way, over 6 passes with no trend (2026-11-23); a 4 MP photo decodes to
    // 13 MB, so leaking its pixels on every analysis would add about 200 MiB per pass.
    const photo = await makeImage(2400, 1800, "jpeg");
    const photoB64 = b64(photo);
    const bomb = headerOnlyPng(60_000, 60_000);
    const truncated = photo.subarray(0, photo.byteLength >> 1);
    const settledRss = async () => {
      let rss = Number.POSITIVE_INFINITY;
      for (let i = 0; i < 4; i++) {
        collectGarbage();
        await new Promise((r) => setTimeout(r, 100));
        rss = Math.min(rss, memory().rss);
      }
      return rss;
    };
    const pass = async () => {
      for (let i = 0; i < 8; i++) {
        const [a, b] = await Promise.all([analyze(photoB64), analyze(photoB64)]);
        const [c, d] = [await analyze(bomb), await analyze(truncated)];
        expect([a.res.status, b.res.status, c.res.status, d.res.status]).toEqual([200, 200, 400, 400]);
        charged += 2;
      }
      return settledRss();
    };
    const passes = [await pass(), await pass(), await pass()];
    const report = `rss after each pass: ${passes.map((n) => `${(n / 2 ** 20).toFixed(0)} MiB`).join(", ")}`;
    expect(passes[2] - passes[0], report).toBeLessThan(128 * 2 ** 20);
    expect(await usage()).toBe(charged);
  });
});
