/**
 * A JPEG's cost bounded before decoding (issue 29, finding 3): a progressive JPEG of thousands of
 * nearly empty scans is a valid file that a decoder takes seconds over; it is refused from its
 * markers, while baseline and progressive photos decode as before.
 */
import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { ImageError } from "../../../src/engine-errors.js";
import { checkImageFile, decodeImage } from "../../../src/image/decode.js";
import { MAX_JPEG_SCANS, readJpegStructure } from "../../../src/image/jpeg-structure.js";
import { makeHandPhoto } from "../../helpers/images.js";
import { makeManyScanJpeg } from "../../helpers/jpeg-scans.js";

async function refusal(bytes: Uint8Array): Promise<unknown> {
  return decodeImage(bytes).then(
    () => undefined,
    (e: unknown) => e,
  );
}

describe("JPEG scans", () => {
  it("refuses a progressive JPEG of 2,647 scans as invalid_image, before decoding and saying why", async () => {
    const many = makeManyScanJpeg(640, 480);
    expect(readJpegStructure(many).scans).toBe(2647);
    // A valid file: a decoder without the bound decodes it (to flat grey).
    const { info } = await sharp(many, { failOn: "error" }).raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height]).toEqual([640, 480]);
    // Refused by the cheap synchronous check that runs before admission, and by the decoder's own.
    expect(() => checkImageFile(many)).toThrow(ImageError);
    const err = await refusal(many);
    expect(err).toBeInstanceOf(ImageError);
    expect((err as ImageError).code).toBe("invalid_image");
    expect((err as ImageError).message).toBe(`The JPEG image has 2647 scans (at most ${MAX_JPEG_SCANS} are accepted).`);
  });

  it("decodes a JPEG of exactly the bound's scans, and baseline, progressive and CMYK photos", async () => {
    const atBound = makeManyScanJpeg(640, 480, { components: 1, acBits: 1 });
    expect(readJpegStructure(atBound).scans).toBe(MAX_JPEG_SCANS);
    expect((await decodeImage(atBound)).width).toBe(640);
    const photo = await makeHandPhoto(1200, 1600);
    const progressive = await sharp(photo).jpeg({ progressive: true }).toBuffer();
    const cmyk = await sharp(photo).toColourspace("cmyk").jpeg({ progressive: true }).toBuffer();
    const withExif = await sharp(photo).withMetadata({ orientation: 6 }).jpeg().toBuffer();
    for (const [jpeg, scans] of [
      [photo, 1],
      [progressive, 10],
      [withExif, 1],
    ] as const) {
      expect(readJpegStructure(jpeg).scans).toBe(scans);
    }
    expect(readJpegStructure(cmyk).scans).toBeGreaterThan(1);
    for (const jpeg of [photo, progressive, cmyk, withExif]) expect((await decodeImage(jpeg)).channels).toBe(3);
  });

  it("refuses arithmetic-coded, lossless and hierarchical JPEGs as invalid_image with their reason", async () => {
    const photo = await makeHandPhoto(640, 480);
    const sof = photo.indexOf(Buffer.from([0xff, 0xc0]));
    expect(sof).toBeGreaterThan(0);
    for (const marker of [0xc9, 0xca, 0xc3, 0xc5]) {
      const other = Buffer.from(photo);
      other[sof + 1] = marker;
      const err = await refusal(other);
      expect((err as ImageError).code).toBe("invalid_image");
      expect((err as ImageError).message).toMatch(/not arithmetic-coded or lossless or hierarchical/);
    }
  });

  it("counts scans past stuffed bytes, restart markers, fill bytes and stray bytes as a decoder does", () => {
    const seg = (marker: number, body: number[]) => [0xff, marker, 0, body.length + 2, ...body];
    const sos = seg(0xda, [1, 1, 0, 0, 63, 0]);
    const parts = [
      [0xff, 0xd8],
      seg(0xe1, [0xff, 0xda, 0xff, 0xda]), // a marker's bytes inside a segment are not a marker
      seg(0xc2, [8, 0, 64, 0, 64, 1, 1, 0x11, 0]),
      [...sos, 0x12, 0xff, 0x00, 0x34, 0xff, 0xd0, 0x56], // stuffed 0xFF and RST0 inside the scan
      [0xff, 0xff, ...sos, 0x78], // fill bytes before a marker
      [...sos, 0x00, 0x9a, 0x11, 0x22], // stray bytes after a scan are its data
      sos,
      [0xff, 0xd9],
      sos, // after EOI: not read
    ];
    const jpeg = Buffer.from(parts.flat());
    expect(readJpegStructure(jpeg)).toEqual({ scans: 4, frame: 0xc2 });
  });
});
