import { describe, expect, it } from "vitest";
import { cropResize, letterboxBox, toTensor, type TensorSpec } from "../../../src/image/preprocess.js";

function solid(width: number, height: number, rgb: [number, number, number]) {
  const data = new Uint8Array(width * height * 3);
  for (let i = 0; i < width * height; i++) data.set(rgb, i * 3);
  return { data, width, height, channels: 3 };
}

describe("letterboxBox()", () => {
  it("is the longer side, with the shorter one centred", () => {
    expect(letterboxBox(400, 200)).toEqual({ x: 0, y: -100, side: 400 });
    expect(letterboxBox(200, 400)).toEqual({ x: -100, y: 0, side: 400 });
    expect(letterboxBox(300, 300)).toEqual({ x: 0, y: 0, side: 300 });
  });
});

describe("cropResize()", () => {
  it("fills the part of a square box outside the image with the pad value", async () => {
    const img = solid(100, 100, [200, 200, 200]);
    // Box from (-50,-50) of side 100: only its bottom-right quarter lies in the image.
    const rgb = await cropResize(img, { x: -50, y: -50, side: 100 }, 32, 0);
    const at = (u: number, v: number) => rgb[(v * 32 + u) * 3];
    expect(at(5, 5)).toBe(0);
    expect(at(20, 5)).toBe(0);
    expect(at(5, 20)).toBe(0);
    expect(at(20, 20)).toBe(200);
    expect(at(31, 31)).toBe(200);
  });

  it("returns only padding for a box entirely outside the image", async () => {
    const rgb = await cropResize(solid(100, 100, [200, 0, 0]), { x: 500, y: 500, side: 50 }, 16, 7);
    expect(rgb.every((v) => v === 7)).toBe(true);
  });
});

describe("toTensor()", () => {
  it("writes planar channels, normalised, in the model's channel order", () => {
    const rgb = new Uint8Array([255, 0, 51]);
    const spec1: TensorSpec = {
      inputSize: 1,
      channelOrder: "RGB",
      normalization: { scale: 255, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5] },
      padValue: 0,
    };
    expect(Array.from(toTensor(rgb, spec1))).toEqual([1, -1, expect.closeTo(-0.6, 5)]);
    const bgr = toTensor(rgb, { ...spec1, channelOrder: "BGR", normalization: { scale: 255, mean: [0, 0, 0], std: [1, 1, 1] } });
    expect(Array.from(bgr)).toEqual([expect.closeTo(0.2, 5), 0, 1]);
  });
});
