/**
 * Property-based fuzzing (fast-check) of the REST decoding path over real HTTP: whatever the
 * body and Content-Type, the answer is a SPEC.md status with a SPEC.md error code (or a 200),
 * never a 500, and the process survives. Usage moves only with the 200s. Runs are bounded so the
 * file takes well under 20 s on a 2-core machine (most inputs are refused before the engine).
 */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import type { Store } from "../../src/auth/store.js";
import { ERRORS } from "../../src/errors.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { makeImage } from "../helpers/images.js";
import { startKeyedServer, type KeyedTestServer } from "../helpers/server.js";

let analyzer: EngineAnalyzer;
let store: Store;
let srv: KeyedTestServer;
let key: string;
let jpeg: Buffer;
let png: Buffer;
let ok = 0;

beforeAll(async () => {
  [analyzer, jpeg, png] = await Promise.all([createTestAnalyzer(), makeImage(96, 80, "jpeg"), makeImage(96, 80, "png")]);
  srv = await startKeyedServer({ analyzer, client: "fuzz", plan: "pro" });
  ({ store, key } = srv);
});
afterAll(async () => {
  await srv?.close();
  await analyzer?.close();
});

/** The statuses and codes a refusal of SPEC.md section 6 may carry for a recognised key. */
const ALLOWED: Record<number, readonly string[]> = {
  400: [
    "invalid_json",
    "invalid_multipart",
    "missing_image",
    "invalid_base64",
    "unsupported_image_format",
    "invalid_image",
    "image_dimensions_out_of_range",
  ],
  413: ["image_too_large"],
  415: ["unsupported_media_type"],
};

interface Outcome {
  status: number;
  code?: string;
}

async function send(body: Uint8Array | string, contentType: string | undefined): Promise<Outcome> {
  const headers: Record<string, string> = { "x-api-key": key };
  if (contentType !== undefined) headers["content-type"] = contentType;
  const res = await fetch(`${srv.url}/v1/palm/analyze`, {
    method: "POST",
    headers,
    body: typeof body === "string" ? body : Buffer.from(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    throw new Error(`status ${res.status}: the body is not JSON: ${text.slice(0, 200)}`);
  }
  if (res.status === 200) {
    ok++;
    return { status: 200 };
  }
  return { status: res.status, code: json?.error?.code };
}

/** expectSpecRefusalOr200: never a 500, and every refusal is a listed status with a listed code. */
function expectSpecOutcome(out: Outcome): void {
  expect(out.status).not.toBe(500);
  if (out.status === 200) return;
  expect(Object.keys(ALLOWED).map(Number), JSON.stringify(out)).toContain(out.status);
  expect(ALLOWED[out.status], JSON.stringify(out)).toContain(out.code);
  expect(Object.keys(ERRORS)).toContain(out.code);
}

const printable = (max: number) => fc.stringMatching(new RegExp(`^[ -~]{0,${max}}$`));
const contentTypes = fc.oneof(
  fc.constantFrom("application/json", "application/json; charset=utf-8", "APPLICATION/JSON", "application/json;charset=latin1"),
  fc.constantFrom(
    "text/plain",
    "application/octet-stream",
    "multipart/form-data; boundary=x",
    "application/x-www-form-urlencoded",
    "image/jpeg",
    "image/png",
  ),
  printable(40),
  fc.constant(undefined),
);
/** base64-looking text: the alphabets, padding, whitespace, a data-URL prefix, and a few strays. */
const base64ish = fc
  .tuple(
    fc.constantFrom("", "data:image/jpeg;base64,", "data:;base64,", "DATA:image/png;BASE64,"),
    fc.stringMatching(/^[A-Za-z0-9+/=_\- \r\n\t.$%]{0,300}$/),
  )
  .map(([prefix, s]) => prefix + s);
/** Base64 of a real JPEG/PNG with bytes flipped, cut or appended: mostly past the sniffing. */
const mutatedImage = fc
  .tuple(
    fc.boolean(),
    fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 12 }),
    fc.option(fc.nat()),
    fc.constantFrom("base64", "base64url"),
  )
  .map(([isPng, flips, cut, encoding]) => {
    const src = Buffer.from(isPng ? png : jpeg);
    for (const [at, v] of flips) src[at % src.byteLength] = v;
    const bytes = cut === null ? src : src.subarray(0, cut % src.byteLength);
    return bytes.toString(encoding as BufferEncoding);
  });
const imageValues = fc.oneof(
  { weight: 3, arbitrary: base64ish },
  { weight: 1, arbitrary: fc.jsonValue({ maxDepth: 3 }) },
  { weight: 1, arbitrary: fc.uint8Array({ maxLength: 600 }).map((b) => Buffer.from(b).toString("base64")) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom([0xff, 0xd8, 0xff], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), fc.uint8Array({ maxLength: 600 }))
      .map(([magic, rest]) => Buffer.concat([Buffer.from(magic), rest]).toString("base64")),
  },
);

describe("REST decoding under fuzzing", () => {
  it("never answers 500 to arbitrary bytes under arbitrary content types", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ maxLength: 4096 }), contentTypes, async (body, ct) => {
        expectSpecOutcome(await send(body, ct));
      }),
      { numRuns: 150 },
    );
  });

  it("never answers 500 to arbitrary JSON documents", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.jsonValue({ maxDepth: 6 }),
        fc.constantFrom("application/json", "application/json; charset=utf-8"),
        async (doc, ct) => {
          expectSpecOutcome(await send(JSON.stringify(doc) ?? "null", ct));
        },
      ),
      { numRuns: 150 },
    );
  });

  it("never answers 500 to JSON objects with arbitrary image values and extra fields", async () => {
    await fc.assert(
      fc.asyncProperty(imageValues, fc.dictionary(printable(12), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }), async (image, extra) => {
        const out = await send(JSON.stringify({ ...extra, image }), "application/json");
        expectSpecOutcome(out);
      }),
      { numRuns: 200 },
    );
  });

  it("never answers 500 to mutated real images (each decodable one is a real analysis)", async () => {
    await fc.assert(
      fc.asyncProperty(mutatedImage, async (image) => {
        expectSpecOutcome(await send(JSON.stringify({ image }), "application/json"));
      }),
      { numRuns: 25 },
    );
  });

  it("is still healthy and has charged exactly the 200s", async () => {
    const res = await fetch(`${srv.url}/v1/palm/health`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ok" });
    expect(await store.usage("fuzz", quotaPeriodOf())).toBe(ok);
    expect(analyzer.stats()).toMatchObject({ running: 0, queued: 0 });
  });
});
