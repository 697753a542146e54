import { describe, expect, it } from "vitest";
import { toTensor, type TensorSpec } from "../../../src/image/preprocess.js";

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
