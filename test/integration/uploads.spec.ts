/**
 * Binary uploads on POST /v1/palm/analyze (SPEC.md section 9): a multipart/form-data file part
 * `image` or a raw image/jpeg|png body, against a real server and the real engine, with curl,
 * fetch, node's HTTP/1.1 and HTTP/2 clients. Every refusal of a recognised key leaves its quota
 * untouched; a keyless upload is refused from its headers, its body never read.
 */
import { execFile } from "node:child_process";
import http from "node:http";
import http2 from "node:http2";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { openH2Session } from "../helpers/h2.js";
import { makeImage } from "../helpers/images.js";
import { registerKey } from "../helpers/keys.js";
import { expectErrorBody, postAnalyze, postExpectingContinue, rawRequest } from "../helpers/rest.js";
import { startKeyedServer, type KeyedTestServer } from "../helpers/server.js";

const run = promisify(execFile);
const hasCurl = await run("curl", ["--version"]).then(
  () => true,
  () => false,
);
const samplePath = new URL("../../examples/sample-palm.jpg", import.meta.url).pathname;
const sample = readFileSync(samplePath);
const MiB = 1024 * 1024;

let analyzer: EngineAnalyzer;
let srv: KeyedTestServer;
let jpeg: Buffer;
let png: Buffer;

beforeAll(async () => {
  [analyzer, jpeg, png] = await Promise.all([createTestAnalyzer(), makeImage(256, 192, "jpeg"), makeImage(200, 160, "png")]);
  srv = await startKeyedServer({ analyzer, client: "acme", plan: "pro" });
});
afterAll(async () => {
  await srv?.close();
  await analyzer?.close();
});

const url = () => `${srv.url}/v1/palm/analyze`;
const usedBy = (client: string) => srv.store.usage(client, quotaPeriodOf());

/** form builds a multipart/form-data body from `parts` with boundary `b`. */
function form(parts: { headers: string[]; body: Buffer | string }[], b = "XyZ-boundary"): { body: Buffer; contentType: string } {
  const chunks: Buffer[] = [];
  for (const p of parts) {
    chunks.push(Buffer.from(`--${b}\r\n${p.headers.map((h) => `${h}\r\n`).join("")}\r\n`), Buffer.from(p.body), Buffer.from("\r\n"));
  }
  chunks.push(Buffer.from(`--${b}--\r\n`));
  return { body: Buffer.concat(chunks), contentType: `multipart/form-data; boundary=${b}` };
}
const filePart = (body: Buffer | string, name = "image") => ({
  headers: [`Content-Disposition: form-data; name="${name}"; filename="palm.jpg"`, "Content-Type: image/jpeg"],
  body,
});

async function post(body: Buffer | FormData, headers: Record<string, string>): Promise<{ res: Response; json: any }> {
  const res = await fetch(url(), { method: "POST", headers, body: body instanceof FormData ? body : new Uint8Array(body) });
  return { res, json: JSON.parse(await res.text()) };
}

/** A fresh client on the free plan (100 a month) for error cases: nothing may be charged. */
async function freshKey(): Promise<{ key: string; expectUntouched(res: Response): Promise<void> }> {
  const client = `c${Math.random().toString(36).slice(2)}`;
  const key = await registerKey(srv.store, client, "free");
  return {
    key,
    async expectUntouched(res) {
      expect(res.headers.get("x-monthly-quota-remaining")).toBe("100");
      expect(await usedBy(client)).toBe(0);
    },
  };
}

describe("binary uploads on POST /v1/palm/analyze", () => {
  it.skipIf(!hasCurl)("curl -F image=@file and curl --data-binary as image/jpeg give the same lines as the JSON request", async () => {
    const curl = async (...args: string[]) => {
      const { stdout } = await run("curl", ["-sS", "-H", `X-API-Key: ${srv.key}`, ...args, url()], { maxBuffer: 64 * MiB });
      return JSON.parse(stdout);
    };
    const multipart = await curl("-F", `image=@${samplePath}`);
    const raw = await curl("--data-binary", `@${samplePath}`, "-H", "Content-Type: image/jpeg");
    const { json } = await postAnalyze(srv.url, { image: sample.toString("base64") }, { "x-api-key": srv.key });
    expect(json.object).toBe("palm.analysis");
    expect(json.results.reason).toBe("");
    expect(json.results.stats.heart.detected).toBe(true);
    for (const answer of [multipart, raw]) {
      expect(answer.object).toBe("palm.analysis");
      expect(answer.results.stats).toEqual(json.results.stats);
      expect(answer.results.hand).toEqual(json.results.hand);
      expect(answer.results.masks).toEqual(json.results.masks);
      const overlay = await sharp(Buffer.from(answer.results.overlay, "base64")).metadata();
      const expected = await sharp(sample).metadata();
      expect([overlay.width, overlay.height]).toEqual([expected.width, expected.height]);
    }
    expect([multipart.usage.requests_used, raw.usage.requests_used].sort()).toEqual(
      [json.usage.requests_used - 2, json.usage.requests_used - 1].sort(),
    );
  });

  it("takes the image part of a fetch FormData among other fields, and a PNG as a raw image/png body", async () => {
    const fd = new FormData();
    fd.append("note", "left hand, morning light");
    fd.append("image", new Blob([new Uint8Array(png)], { type: "image/png" }), "palm.png");
    fd.append("extra", new Blob([new Uint8Array(1000).fill(7)]), "other.bin");
    const a = await post(fd, { "x-api-key": srv.key });
    expect(a.res.status).toBe(200);
    expect((await sharp(Buffer.from(a.json.results.overlay, "base64")).metadata()).width).toBe(200);

    const b = await post(png, { "x-api-key": srv.key, "content-type": "image/png" });
    expect(b.res.status).toBe(200);
    expect(b.json.results.stats).toEqual(a.json.results.stats);
  });

  it("recognises the format from the bytes, not from the declared type (a PNG declared image/jpeg)", async () => {
    const { res, json } = await post(png, { "x-api-key": srv.key, "content-type": "image/jpeg" });
    expect(res.status).toBe(200);
    expect((await sharp(Buffer.from(json.results.overlay, "base64")).metadata()).height).toBe(160);
  });

  it("takes a form whose boundary is quoted and whose image part arrives in 7-byte chunks", async () => {
    const { body } = form([{ headers: ['Content-Disposition: form-data; name="image"'], body: jpeg }], "a:b c");
    const res = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = http.request({
        host: "127.0.0.1",
        port: srv.port,
        path: "/v1/palm/analyze",
        method: "POST",
        agent: false,
        headers: {
          "x-api-key": srv.key,
          "content-type": 'multipart/form-data; boundary="a:b c"',
          "content-length": String(body.byteLength),
        },
      });
      req.on("response", (m) => {
        let text = "";
        m.setEncoding("utf8");
        m.on("data", (d) => (text += d));
        m.on("end", () => resolve({ status: m.statusCode ?? 0, body: text }));
      });
      req.on("error", reject);
      let i = 0;
      const pump = () => {
        if (i >= body.byteLength) return void req.end();
        req.write(body.subarray(i, i + 7));
        i += 7;
        setImmediate(pump);
      };
      pump();
    });
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body).object).toBe("palm.analysis");
  });

  it("serves a multipart upload over HTTP/2", async () => {
    const session = await openH2Session(srv.url);
    try {
      const { body, contentType } = form([filePart(jpeg)]);
      const stream = session.request({
        ":method": "POST",
        ":path": "/v1/palm/analyze",
        "content-type": contentType,
        "x-api-key": srv.key,
      });
      stream.end(body);
      const [status, text] = await new Promise<[number, string]>((resolve, reject) => {
        let s = 0;
        let t = "";
        stream.on("response", (h) => (s = Number(h[http2.constants.HTTP2_HEADER_STATUS])));
        stream.setEncoding("utf8");
        stream.on("data", (d) => (t += d));
        stream.on("end", () => resolve([s, t]));
        stream.on("error", reject);
      });
      expect(status).toBe(200);
      expect(JSON.parse(text).results.stats.life.detected).toBe(false);
    } finally {
      session.close();
    }
  });
});

describe("binary upload errors, each leaving the quota untouched", () => {
  it.each([
    ["a form without an image part", 400, "missing_image", () => form([filePart(jpeg, "photo")]), /no "image" part/],
    ["a form with two image parts", 400, "missing_image", () => form([filePart(jpeg), filePart(png)]), /more than one "image" part/],
    ["an empty image part", 400, "missing_image", () => form([filePart("")]), /empty/],
    ["an image part that is text", 400, "unsupported_image_format", () => form([filePart("hello, not a photo")]), /JPEG or PNG/],
    ["an image part that is a broken JPEG", 400, "invalid_image", () => form([filePart(jpeg.subarray(0, 300))]), /could not be/],
    [
      "a form cut before its closing boundary",
      400,
      "invalid_multipart",
      () => {
        const f = form([filePart(jpeg)]);
        return { ...f, body: f.body.subarray(0, f.body.byteLength - 20) };
      },
      /closing boundary/,
    ],
    [
      "a part without Content-Disposition",
      400,
      "invalid_multipart",
      () => form([{ headers: ["Content-Type: image/jpeg"], body: jpeg }]),
      /Content-Disposition/,
    ],
    [
      "multipart/form-data without a boundary",
      400,
      "invalid_multipart",
      () => ({ body: form([filePart(jpeg)]).body, contentType: "multipart/form-data" }),
      /boundary/,
    ],
  ])("answers %s with %i %s", async (_, status, code, make, message) => {
    const { key, expectUntouched } = await freshKey();
    const { body, contentType } = make();
    const { res, json } = await post(body, { "x-api-key": key, "content-type": contentType });
    expectErrorBody(res, json, status, code);
    expect(json.error.message).toMatch(message);
    await expectUntouched(res);
  });

  it.each([
    ["an empty image/jpeg body", 400, "missing_image", "image/jpeg", Buffer.alloc(0)],
    ["an image/png body that is not an image", 400, "unsupported_image_format", "image/png", Buffer.from("GIF89a......")],
    ["an image/gif body", 415, "unsupported_media_type", "image/gif", png],
    ["an application/octet-stream body", 415, "unsupported_media_type", "application/octet-stream", png],
  ])("answers %s with %i %s", async (_, status, code, contentType, body) => {
    const { key, expectUntouched } = await freshKey();
    const { res, json } = await post(body, { "x-api-key": key, "content-type": contentType });
    expectErrorBody(res, json, status, code);
    await expectUntouched(res);
  });

  it("refuses a raw image body over 5 MiB from its Content-Length, before reading it", async () => {
    const { key } = await freshKey();
    const r = await rawRequest({
      port: srv.port,
      headers: { "x-api-key": key, "content-type": "image/jpeg", "content-length": String(5 * MiB + 1) },
      chunk: Buffer.alloc(64 * 1024, 0xff),
      totalBytes: 64 * 1024,
      end: false,
    });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("image_too_large");
  });

  it("refuses a raw image/jpeg body sent without Content-Length as soon as it passes 5 MiB, in a body that never ends", async () => {
    const { key, expectUntouched } = await freshKey();
    const chunk = Buffer.alloc(256 * 1024, 0xff);
    jpeg.copy(chunk, 0, 0, 64); // a JPEG's first bytes: only its size is wrong
    const r = await rawRequest({
      port: srv.port,
      headers: { "x-api-key": key, "content-type": "image/jpeg", "transfer-encoding": "chunked" },
      chunk,
      totalBytes: 7.5 * MiB,
      end: false,
    });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("image_too_large");
    await expectUntouched(new Response(null, { headers: r.headers as Record<string, string> }));
  });

  it("refuses a form's image part as soon as it passes 5 MiB, in a body that never ends", async () => {
    const { key, expectUntouched } = await freshKey();
    const head = Buffer.from('--b\r\nContent-Disposition: form-data; name="image"; filename="big.jpg"\r\n\r\n');
    const chunk = Buffer.alloc(256 * 1024, 0xff);
    chunk.set(head);
    const r = await rawRequest({
      port: srv.port,
      headers: { "x-api-key": key, "content-type": "multipart/form-data; boundary=b" },
      chunk,
      totalBytes: 7.5 * MiB,
      end: false,
    });
    expect(r.status).toBe(413);
    expect(JSON.parse(r.body).error.code).toBe("image_too_large");
    // The body never ends (end: false): only a refusal made while it streams can answer at all.
    const res = new Response(null, { headers: r.headers as Record<string, string> });
    await expectUntouched(res);
  });

  it("refuses a second image part as soon as its headers arrive, in a body that never ends", async () => {
    const { key } = await freshKey();
    const { body } = form([filePart(png), filePart(png)]);
    const r = await rawRequest({
      port: srv.port,
      headers: { "x-api-key": key, "content-type": "multipart/form-data; boundary=XyZ-boundary" },
      chunk: body.subarray(0, body.byteLength - 30), // stops inside the second part
      totalBytes: body.byteLength - 30,
      end: false,
    });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error.code).toBe("missing_image");
  });

  it("refuses a keyless multipart upload from its headers, as a keyless JSON one: no 100 Continue, no body read", async () => {
    const { body, contentType } = form([filePart(jpeg)]);
    const multipart = await postExpectingContinue(srv.port, "/v1/palm/analyze", { "content-type": contentType }, body.toString("latin1"));
    const json = await postExpectingContinue(srv.port, "/v1/palm/analyze", { "content-type": "application/json" }, "{}");
    expect(multipart).toEqual({ status: 401, continued: false });
    expect(json).toEqual({ status: 401, continued: false });
    // And a body that never ends is answered all the same.
    const r = await rawRequest({
      port: srv.port,
      headers: { "content-type": contentType, "content-length": String(4 * MiB) },
      chunk: body.subarray(0, 1000),
      totalBytes: 1000,
      end: false,
    });
    expect(r.status).toBe(401);
    expect(JSON.parse(r.body).error.code).toBe("missing_api_key");
  });
});
