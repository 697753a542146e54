import sharp, { type OutputInfo } from "sharp";
import { describe, expect, it } from "vitest";
import { LINE_COLOURS, encodeMaskPng, encodeOverlayJpeg, overlayStrokeRadius } from "../../../src/image/encode.js";
import { countMask, dilateMask, emptyMask, maskToBytes, type BoxMask } from "../../../src/image/mask.js";

/** A deterministic pseudo-random mask inside a box. */
function randomMask(width: number, height: number, box: [number, number, number, number], density: number, seed = 1): BoxMask {
  const [x0, y0, x1, y1] = box;
  const data = new Uint8Array((x1 - x0) * (y1 - y0));
  let s = seed;
  for (let i = 0; i < data.length; i++) {
    s = (s * 1103515245 + 12345) & 0x7fffffff;
    data[i] = s / 0x7fffffff < density ? 1 : 0;
  }
  return { width, height, x0, y0, x1, y1, data };
}

async function decodeGrey(png: Uint8Array): Promise<{ data: Buffer; info: OutputInfo }> {
  return sharp(png).toColourspace("b-w").raw().toBuffer({ resolveWithObject: true });
}

describe("encodeMaskPng()", () => {
  it.each([
    [64, 64],
    [97, 65], // width not a multiple of 8
    [1001, 333],
  ])("writes a %ix%i single-channel PNG that decodes to exactly the mask as 0/255", async (w, h) => {
    const mask = randomMask(w, h, [3, 5, w - 1, h - 2], 0.3);
    const png = encodeMaskPng(mask);
    const meta = await sharp(png).metadata();
    expect([meta.format, meta.width, meta.height, meta.channels]).toEqual(["png", w, h, 1]);
    const { data, info } = await decodeGrey(png);
    expect(info.channels).toBe(1);
    expect(new Set(data)).toEqual(new Set([0, 255]));
    expect(Buffer.from(maskToBytes(mask)).equals(data)).toBe(true);
  });

  it("writes an empty mask as an all-zero PNG of the full size", async () => {
    const png = encodeMaskPng(emptyMask(4032, 3024));
    expect(png.length).toBeLessThan(10_000);
    const { data, info } = await decodeGrey(png);
    expect([info.width, info.height, info.channels]).toEqual([4032, 3024, 1]);
    expect(data.every((v) => v === 0)).toBe(true);
  });

  it("encodes a 12 MP line mask in a few kilobytes", () => {
    const mask = randomMask(4032, 3024, [1500, 1200, 2500, 1230], 1);
    const png = encodeMaskPng(mask);
    expect(png.length).toBeLessThan(20_000);
  });
});

describe("dilateMask()", () => {
  it("equals a brute-force square dilation, clipped to the image", () => {
    const mask = randomMask(40, 30, [0, 2, 37, 30], 0.03, 7);
    for (const r of [1, 2, 5]) {
      const got = maskToBytes(dilateMask(mask, r), 1);
      const src = maskToBytes(mask, 1);
      const want = new Uint8Array(40 * 30);
      for (let y = 0; y < 30; y++)
        for (let x = 0; x < 40; x++)
          for (let dy = -r; dy <= r; dy++)
            for (let dx = -r; dx <= r; dx++) {
              const yy = y + dy;
              const xx = x + dx;
              if (yy >= 0 && yy < 30 && xx >= 0 && xx < 40 && src[yy * 40 + xx]) want[y * 40 + x] = 1;
            }
      expect(Buffer.from(got).equals(Buffer.from(want))).toBe(true);
    }
  });

  it("leaves an empty mask empty", () => {
    expect(countMask(dilateMask(emptyMask(50, 50), 3))).toBe(0);
  });
});

describe("overlayStrokeRadius()", () => {
  it("scales with the longer side: 7 px at 4032x3024, 2 at 960x720, at least 1", () => {
    expect(overlayStrokeRadius(4032, 3024)).toBe(7);
    expect(overlayStrokeRadius(960, 720)).toBe(2);
    expect(overlayStrokeRadius(64, 64)).toBe(1);
  });
});

describe("encodeOverlayJpeg()", () => {
  it("draws heart red, head blue and life green over the photo, same size, elsewhere untouched", async () => {
    const w = 300;
    const h = 200;
    const photo = { data: new Uint8Array(w * h * 3).fill(128), width: w, height: h, channels: 3 };
    const band = (y: number): BoxMask => randomMask(w, h, [50, y, 250, y + 6], 1);
    const jpeg = await encodeOverlayJpeg(
      photo,
      [
        { mask: band(40), colour: LINE_COLOURS.heart },
        { mask: band(100), colour: LINE_COLOURS.head },
        { mask: band(160), colour: LINE_COLOURS.life },
      ],
      { radius: 1 },
    );
    const meta = await sharp(jpeg).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(["jpeg", w, h]);
    const { data } = await sharp(jpeg).raw().toBuffer({ resolveWithObject: true });
    const at = (x: number, y: number) => Array.from(data.subarray((y * w + x) * 3, (y * w + x) * 3 + 3));
    const [hr, hg, hb] = at(150, 43);
    expect(hr - Math.max(hg, hb)).toBeGreaterThan(80);
    const [br, bg, bb] = at(150, 103);
    expect(bb - Math.max(br, bg)).toBeGreaterThan(80);
    const [lr, lg, lb] = at(150, 163);
    expect(lg - Math.max(lr, lb)).toBeGreaterThan(80);
    // Semi-transparent: the photo still shows through (pure colours would be 255/0).
    expect(hr).toBeLessThan(250);
    for (const [x, y] of [
      [10, 10],
      [150, 70],
      [290, 190],
    ]) {
      for (const v of at(x, y)) expect(Math.abs(v - 128)).toBeLessThanOrEqual(3);
    }
  });

  it("returns the photo alone when no line is drawn", async () => {
    const photo = { data: new Uint8Array(64 * 80 * 3).fill(90), width: 64, height: 80, channels: 3 };
    const jpeg = await encodeOverlayJpeg(photo, [{ mask: emptyMask(64, 80), colour: LINE_COLOURS.heart }]);
    const { data, info } = await sharp(jpeg).raw().toBuffer({ resolveWithObject: true });
    expect([info.width, info.height]).toEqual([64, 80]);
    expect(data.every((v) => Math.abs(v - 90) <= 2)).toBe(true);
  });
});
