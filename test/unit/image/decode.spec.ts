import sharp, { type Sharp } from "sharp";
import { beforeAll, describe, expect, it } from "vitest";
import { IMAGE_LIMITS, decodeImage, readImageHeader, sniffImageFormat, type DecodeOptions } from "../../../src/image/decode.js";
import { ImageError, type ImageErrorCode } from "../../../src/engine-errors.js";
import { asymmetricRgb, corruptPngCrc, jpegOf, pngBomb, pngOf, solidJpeg } from "./helpers.js";

async function expectCode(bytes: Uint8Array, code: ImageErrorCode, options: DecodeOptions = {}): Promise<void> {
  const err = await decodeImage(bytes, options).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ImageError);
  expect((err as ImageError).code).toBe(code);
}

/** The colour at (x, y) of a decoded RGB image. */
function pixel(img: { data: Uint8Array; width: number }, x: number, y: number): number[] {
  const i = (y * img.width + x) * 3;
  return [img.data[i], img.data[i + 1], img.data[i + 2]];
}

/** Names the dominant primary of a colour, tolerant of JPEG artefacts and colour-space round trips. */
function colourName(c: number[]): string {
  const [r, g, b] = c;
  if (r > 200 && g > 200 && b > 200) return "white";
  if (r > g + 60 && r > b + 60) return "red";
  if (g > r + 60 && g > b + 60) return "green";
  if (b > r + 60 && b > g + 60) return "blue";
  return `?${c.join(",")}`;
}

describe("sniffImageFormat()", () => {
  it("recognises JPEG and PNG by their leading bytes only", () => {
    expect(sniffImageFormat(Uint8Array.from([0xff, 0xd8, 0xff, 0xe0]))).toBe("jpeg");
    expect(sniffImageFormat(Uint8Array.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0]))).toBe("png");
    expect(sniffImageFormat(Uint8Array.from([0x89, 0x50, 0x4e, 0x47]))).toBeUndefined();
    expect(sniffImageFormat(Buffer.from("GIF89a"))).toBeUndefined();
    expect(sniffImageFormat(new Uint8Array(0))).toBeUndefined();
  });
});

describe("decodeImage()", () => {
  const W = 96;
  const H = 64;
  let upright: Buffer;
  beforeAll(() => {
    upright = asymmetricRgb(W, H);
  });

  it("decodes a baseline JPEG to upright 8-bit RGB of the same size", async () => {
    const img = await decodeImage(await jpegOf(upright, W, H));
    expect([img.width, img.height, img.channels, img.format]).toEqual([W, H, 3, "jpeg"]);
    expect(img.data.length).toBe(W * H * 3);
    expect(colourName(pixel(img, 10, 10))).toBe("red");
  });

  it("decodes a progressive JPEG", async () => {
    const img = await decodeImage(await jpegOf(upright, W, H, { progressive: true }));
    expect([img.width, img.height]).toEqual([W, H]);
    expect(colourName(pixel(img, W - 10, 10))).toBe("green");
  });

  it("decodes a CMYK JPEG to RGB", async () => {
    const cmyk = await sharp(upright, { raw: { width: W, height: H, channels: 3 } })
      .toColourspace("cmyk")
      .jpeg()
      .toBuffer();
    expect((await sharp(cmyk).metadata()).space).toBe("cmyk");
    const img = await decodeImage(cmyk);
    expect(img.channels).toBe(3);
    expect(colourName(pixel(img, 10, H - 10))).toBe("blue");
  });

  it("decodes a greyscale JPEG to 3 equal channels", async () => {
    const grey = await sharp(upright, { raw: { width: W, height: H, channels: 3 } })
      .greyscale()
      .jpeg()
      .toBuffer();
    const img = await decodeImage(grey);
    expect(img.channels).toBe(3);
    const [r, g, b] = pixel(img, W - 10, H - 10);
    expect(r).toBeGreaterThan(240);
    expect(Math.abs(r - g) + Math.abs(g - b)).toBeLessThanOrEqual(2);
  });

  it("decodes a 16-bit PNG to 8 bits", async () => {
    const png16 = await sharp(upright, { raw: { width: W, height: H, channels: 3 } })
      .toColourspace("rgb16")
      .png()
      .toBuffer();
    expect((await sharp(png16).metadata()).depth).toBe("ushort");
    const img = await decodeImage(png16);
    expect(img.data.length).toBe(W * H * 3);
    expect(pixel(img, 10, 10)).toEqual([255, 0, 0]);
  });

  it("flattens a PNG with alpha onto white", async () => {
    const rgba = Buffer.alloc(W * H * 4);
    for (let i = 0; i < W * H; i++) {
      rgba[i * 4] = 255; // red...
      rgba[i * 4 + 3] = i % W < W / 2 ? 255 : 0; // ...opaque on the left, transparent on the right
    }
    const img = await decodeImage(await pngOf(rgba, W, H, 4));
    expect(pixel(img, 10, 10)).toEqual([255, 0, 0]);
    expect(pixel(img, W - 10, 10)).toEqual([255, 255, 255]);
  });

  it("decodes a greyscale PNG", async () => {
    const grey = Buffer.alloc(W * H, 200);
    const img = await decodeImage(await pngOf(grey, W, H, 1));
    expect(pixel(img, 5, 5)).toEqual([200, 200, 200]);
  });

  // EXIF orientation n shows the stored image transformed; the decoder must undo it so that
  // the quadrant colours come out where they are in `upright`.
  it.each([1, 2, 3, 4, 5, 6, 7, 8])("applies EXIF orientation %i: the output is upright", async (orientation) => {
    // Store the image such that displaying it with `orientation` gives `upright`.
    const inverse: Record<number, (s: Sharp) => Sharp> = {
      1: (s) => s,
      2: (s) => s.flop(),
      3: (s) => s.rotate(180),
      4: (s) => s.flip(),
      // sharp mirrors before it rotates, whatever the call order.
      5: (s) => s.rotate(-90).flop(), // transpose
      6: (s) => s.rotate(-90),
      7: (s) => s.rotate(90).flop(), // transverse
      8: (s) => s.rotate(90),
    };
    const storedRaw = await inverse[orientation](sharp(upright, { raw: { width: W, height: H, channels: 3 } }))
      .raw()
      .toBuffer({ resolveWithObject: true });
    const jpeg = await sharp(storedRaw.data, { raw: { width: storedRaw.info.width, height: storedRaw.info.height, channels: 3 } })
      .withMetadata({ orientation })
      .jpeg({ quality: 95 })
      .toBuffer();
    expect((await sharp(jpeg).metadata()).orientation).toBe(orientation);
    const header = await readImageHeader(jpeg);
    expect([header.width, header.height]).toEqual([W, H]);
    const img = await decodeImage(jpeg);
    expect([img.width, img.height]).toEqual([W, H]);
    const names = [pixel(img, 10, 10), pixel(img, W - 10, 10), pixel(img, 10, H - 10), pixel(img, W - 10, H - 10)].map(colourName);
    expect(names).toEqual(["red", "green", "blue", "white"]);
  });

  it.each([1, 6, 8])(
    "decodes a JPEG of EXIF orientation %i reduced by 3, 5 and 9: upright, each side divided, the full decode's pixels shrunk",
    async (orientation) => {
      const w = 450;
      const h = 300;
      // Quadrants with a soft diagonal ramp, so that a copy turned or misplaced differs.
      const raw = asymmetricRgb(w, h);
      for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw[(y * w + x) * 3 + 1] |= Math.round((60 * (x + y)) / (w + h));
      const turn: Record<number, number> = { 1: 0, 6: -90, 8: 90 };
      const jpeg = await sharp(raw, { raw: { width: w, height: h, channels: 3 } })
        .rotate(turn[orientation])
        .withMetadata({ orientation })
        .jpeg({ quality: 95 })
        .toBuffer();
      const full = await decodeImage(jpeg);
      expect([full.width, full.height]).toEqual([w, h]);
      for (const shrink of [3, 5, 9]) {
        const img = await decodeImage(jpeg, { shrink });
        const [rw, rh] = [Math.round(w / shrink), Math.round(h / shrink)];
        expect([img.width, img.height, img.channels], `shrink ${shrink}`).toEqual([rw, rh, 3]);
        const names = [pixel(img, 2, 2), pixel(img, rw - 3, 2), pixel(img, 2, rh - 3), pixel(img, rw - 3, rh - 3)].map(colourName);
        expect(names, `shrink ${shrink}`).toEqual(["red", "green", "blue", "white"]);
        const ref = await sharp(full.data, { raw: { width: w, height: h, channels: 3 } })
          .resize(rw, rh, { fit: "fill" })
          .raw()
          .toBuffer();
        let diff = 0;
        for (let i = 0; i < ref.length; i++) diff += Math.abs(ref[i] - img.data[i]);
        expect(diff / ref.length, `shrink ${shrink}`).toBeLessThan(4);
      }
    },
  );

  it("rejects an empty file, GIF, WebP, SVG, PDF and text as unsupported_image_format", async () => {
    const gif = await sharp({ create: { width: 80, height: 80, channels: 3, background: "#888" } })
      .gif()
      .toBuffer();
    const webp = await sharp({ create: { width: 80, height: 80, channels: 3, background: "#888" } })
      .webp()
      .toBuffer();
    for (const bytes of [
      new Uint8Array(0),
      gif,
      webp,
      Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"/>'),
      Buffer.from("%PDF-1.4\n%..."),
      Buffer.from("just some text, renamed to photo.jpg"),
    ]) {
      await expectCode(bytes, "unsupported_image_format");
    }
  });

  it("rejects a file over 5 MiB as image_too_large before decoding it", async () => {
    const big = Buffer.alloc(IMAGE_LIMITS.maxBytes + 1);
    big.set([0xff, 0xd8, 0xff]);
    await expectCode(big, "image_too_large");
  });

  it("rejects truncated JPEG and PNG files as invalid_image, reduced or not", async () => {
    const jpeg = await jpegOf(upright, W, H);
    const png = await pngOf(upright, W, H);
    await expectCode(jpeg.subarray(0, Math.floor(jpeg.length * 0.6)), "invalid_image");
    await expectCode(jpeg.subarray(0, Math.floor(jpeg.length * 0.6)), "invalid_image", { shrink: 3 });
    await expectCode(jpeg.subarray(0, Math.floor(jpeg.length * 0.95)), "invalid_image", { shrink: 9 });
    await expectCode(png.subarray(0, Math.floor(png.length * 0.6)), "invalid_image");
    await expectCode(jpeg.subarray(0, 3), "invalid_image");
  });

  it("rejects a PNG with a corrupt CRC as invalid_image", async () => {
    await expectCode(corruptPngCrc(await pngOf(upright, W, H)), "invalid_image");
  });

  it("rejects a JPEG with garbage after its header as invalid_image", async () => {
    const jpeg = Buffer.from(await jpegOf(upright, W, H));
    for (let i = Math.floor(jpeg.length / 2); i < jpeg.length - 2; i++) jpeg[i] = 0xff;
    await expectCode(jpeg, "invalid_image");
  });

  it("refuses a 60,000 x 60,000 decompression bomb from its header, in milliseconds", async () => {
    const bomb = pngBomb(60_000, 60_000);
    expect(bomb.length).toBeLessThan(1000);
    const start = performance.now();
    await expectCode(bomb, "image_dimensions_out_of_range");
    expect(performance.now() - start).toBeLessThan(500);
  });

  it("rejects sides under 64 or over 10,000 px and more than 40 MP as image_dimensions_out_of_range", async () => {
    await expectCode(await solidJpeg(1, 1), "image_dimensions_out_of_range");
    await expectCode(await solidJpeg(63, 63), "image_dimensions_out_of_range");
    await expectCode(await solidJpeg(64, 63), "image_dimensions_out_of_range");
    await expectCode(pngBomb(10_001, 64), "image_dimensions_out_of_range");
    await expectCode(pngBomb(64, 10_001), "image_dimensions_out_of_range");
    await expectCode(pngBomb(8_000, 5_001), "image_dimensions_out_of_range"); // 40.008 MP
  });

  it("accepts the limits themselves: 64 x 64", async () => {
    const img = await decodeImage(await solidJpeg(64, 64));
    expect([img.width, img.height]).toEqual([64, 64]);
  });

  it("checks the limits on the oriented size", async () => {
    // Stored 70 x 64 with orientation 6 displays as 64 x 70; stored 63 wide would be refused only when rotated.
    const stored = await sharp({ create: { width: 100, height: 63, channels: 3, background: "#777" } })
      .withMetadata({ orientation: 6 })
      .jpeg()
      .toBuffer();
    const err = await readImageHeader(stored).catch((e: unknown) => e);
    expect((err as ImageError).code).toBe("image_dimensions_out_of_range");
    expect((err as ImageError).message).toContain("63x100");
  });
});
