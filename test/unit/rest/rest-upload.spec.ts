import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { reasonOf } from "../../../src/errors.js";
import { createMultipartImageReader, restBodyKindOf } from "../../../src/rest/rest-upload.js";

const B = "----form7MA4YWxkTrZu0gW";
const CT = `multipart/form-data; boundary=${B}`;

function formOf(parts: { name: string; body: Buffer }[]): Buffer {
  const chunks = parts.flatMap((p) => [
    Buffer.from(`--${B}\r\nContent-Disposition: form-data; name="${p.name}"; filename="x.bin"\r\n\r\n`),
    p.body,
    Buffer.from("\r\n"),
  ]);
  return Buffer.concat([Buffer.from("preamble\r\n"), ...chunks, Buffer.from(`--${B}--\r\nepilogue`)]);
}

function read(body: Buffer, cuts: number[], max?: number): Uint8Array {
  const r = createMultipartImageReader(CT, max);
  let at = 0;
  for (const c of [...cuts.sort((a, b) => a - b), body.byteLength]) {
    r.push(body.subarray(at, Math.max(at, c)));
    at = Math.max(at, c);
  }
  return r.end();
}

function reasonThrown(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return reasonOf(e as never);
  }
  return undefined;
}

describe("createMultipartImageReader()", () => {
  it("returns the image part's exact bytes however the body is cut into chunks", () => {
    fc.assert(
      fc.property(
        // Bytes that look like the delimiter's start (CR, LF, dashes) are the hard case.
        fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a.map((v) => [13, 10, 45, v][v % 4]))),
        fc.uint8Array({ maxLength: 50 }),
        fc.array(fc.nat({ max: 800 }), { maxLength: 6 }),
        (image, other, cuts) => {
          const body = formOf([
            { name: "note", body: Buffer.from(other) },
            { name: "image", body: image.byteLength === 0 ? Buffer.from([1]) : image },
          ]);
          expect(Buffer.from(read(body, cuts))).toEqual(image.byteLength === 0 ? Buffer.from([1]) : image);
        },
      ),
      { numRuns: 400 },
    );
  });

  it("refuses a second image part, a missing one, an oversized one and an unclosed form", () => {
    const img = Buffer.alloc(100, 7);
    expect(
      reasonThrown(() =>
        read(
          formOf([
            { name: "image", body: img },
            { name: "image", body: img },
          ]),
          [],
        ),
      ),
    ).toBe("missing_image");
    expect(reasonThrown(() => read(formOf([{ name: "file", body: img }]), []))).toBe("missing_image");
    expect(reasonThrown(() => read(formOf([{ name: "image", body: img }]), [], 99))).toBe("image_too_large");
    const whole = formOf([{ name: "image", body: img }]);
    expect(reasonThrown(() => read(whole.subarray(0, whole.byteLength - 15), []))).toBe("invalid_multipart");
    expect(reasonThrown(() => createMultipartImageReader("multipart/form-data"))).toBe("invalid_multipart");
  });
});

describe("restBodyKindOf()", () => {
  it.each([
    ["application/json; charset=utf-8", "json"],
    ["Multipart/Form-Data; boundary=x", "multipart"],
    ["image/jpeg", "image"],
    ["IMAGE/PNG", "image"],
    ["image/gif", undefined],
    ["application/x-www-form-urlencoded", undefined],
    [undefined, undefined],
  ])("classifies %s as %s", (ct, kind) => {
    expect(restBodyKindOf(ct)).toBe(kind);
  });
});
