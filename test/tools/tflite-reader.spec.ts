import { describe, expect, it } from "vitest";
import { readHandSources } from "../../tools/hand-models/build-hand-models.js";
import { isTflite, readTflite, TfliteError } from "../../tools/hand-models/tflite-reader.js";

const sources = readHandSources();

function opCounts(bytes: Uint8Array): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const o of readTflite(bytes).operators) counts[o.op] = (counts[o.op] ?? 0) + 1;
  return counts;
}

describe("readHandSources()", () => {
  it("finds the four TFLite models of @mediapipe/hands 0.4.1675469240 and the handedness labels", () => {
    expect(sources.packageVersion).toBe("0.4.1675469240");
    expect(sources.handednessLabels).toEqual(["Left", "Right"]);
    // The packed palm detectors sit at the byte ranges the issue names: 11-2,341,291 and 2,341,291-4,326,731.
    expect(sources.palmDetectionFull.byteOffset).toBe(11);
    expect(sources.palmDetectionFull.length).toBe(2_341_291 - 11);
    expect(sources.palmDetectionLite.length).toBe(4_326_731 - 2_341_291);
    for (const m of [sources.palmDetectionFull, sources.palmDetectionLite, sources.handLandmarkFull, sources.handLandmarkLite]) {
      expect(isTflite(m)).toBe(true);
    }
  });
});

describe("readTflite()", () => {
  it("reads the full palm detector: one NHWC 192x192 input, boxes [1,2016,18] and scores [1,2016,1], and its operator set", () => {
    const m = readTflite(sources.palmDetectionFull);
    expect(m.inputs.map((i) => m.tensors[i].shape)).toEqual([[1, 192, 192, 3]]);
    expect(m.outputs.map((i) => m.tensors[i].shape)).toEqual([
      [1, 2016, 18],
      [1, 2016, 1],
    ]);
    expect(opCounts(sources.palmDetectionFull)).toEqual({
      DEQUANTIZE: 133,
      CONV_2D: 35,
      PRELU: 31,
      DEPTHWISE_CONV_2D: 28,
      ADD: 30,
      MAX_POOL_2D: 4,
      PAD: 3,
      RESIZE_BILINEAR: 2,
      RESHAPE: 4,
      CONCATENATION: 2,
    });
    const firstConv = m.operators.find((o) => o.op === "CONV_2D")!;
    expect(m.tensors[firstConv.inputs[0]].shape).toEqual([1, 192, 192, 3]);
    expect(firstConv.options).toMatchObject({ padding: 0, strideW: 2, strideH: 2, activation: 0 });
    const resize = m.operators.find((o) => o.op === "RESIZE_BILINEAR")!;
    expect(resize.options).toEqual({ alignCorners: false, halfPixelCenters: true });
    // Weights are fp16, dequantized in the graph.
    const deq = m.operators.find((o) => o.op === "DEQUANTIZE")!;
    expect(m.tensors[deq.inputs[0]].type).toBe("FLOAT16");
    expect(m.buffers[m.tensors[deq.inputs[0]].buffer].length).toBeGreaterThan(0);
  });

  it("reads the full landmark model: 224x224 input; landmarks, presence, handedness, world landmarks", () => {
    const m = readTflite(sources.handLandmarkFull);
    expect(m.inputs.map((i) => m.tensors[i].shape)).toEqual([[1, 224, 224, 3]]);
    expect(m.outputs.map((i) => m.tensors[i].shape)).toEqual([
      [1, 63],
      [1, 1],
      [1, 1],
      [1, 63],
    ]);
    expect(opCounts(sources.handLandmarkFull)).toEqual({
      DEQUANTIZE: 102,
      CONV_2D: 31,
      DEPTHWISE_CONV_2D: 16,
      ADD: 9,
      MEAN: 1,
      FULLY_CONNECTED: 4,
      LOGISTIC: 2,
    });
    // Presence and handedness end in a sigmoid inside the model: they are probabilities.
    for (const out of m.outputs.slice(1, 3)) {
      expect(m.operators.find((o) => o.outputs.includes(out))!.op).toBe("LOGISTIC");
    }
  });

  it("refuses bytes without the TFL3 identifier", () => {
    expect(() => readTflite(new Uint8Array(64))).toThrow(TfliteError);
    expect(isTflite(new TextEncoder().encode("....TFL3"))).toBe(false); // too short to be a model
  });
});
