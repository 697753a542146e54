import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readOnnxMetadataProps } from "../../src/inference/model-metadata.js";
import { createHandLandmarker } from "../../src/landmarks/hand-landmarker.js";
import { HAND_MODEL_FILES } from "../../src/landmarks/hand-models.js";
import { buildHandModels } from "../../tools/hand-models/build-hand-models.js";

describe("buildHandModels()", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "hand-models-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("converts both models from the installed package, then keeps them unless forced", async () => {
    const first = await buildHandModels(dir);
    expect(first).toEqual({ palmPath: join(dir, HAND_MODEL_FILES.palm), landmarkPath: join(dir, HAND_MODEL_FILES.landmark), built: true });
    expect((await buildHandModels(dir)).built).toBe(false);
    expect((await buildHandModels(dir, { force: true })).built).toBe(true);
    const props = readOnnxMetadataProps(await readFile(first.landmarkPath));
    expect(props.source).toBe("@mediapipe/hands@0.4.1675469240/hand_landmark_full.tflite");
    expect(props.source_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(props.license).toMatch(/Apache-2\.0/);
    expect(props.handedness_labels).toBe("Left,Right");
  });

  it("createHandLandmarker never converts: missing models are an error naming the build command", async () => {
    const empty = join(dir, "fresh");
    await expect(createHandLandmarker({ modelDir: empty, warmUp: false })).rejects.toThrow(/npm run build:hand-models/);
    expect((await buildHandModels(empty)).built).toBe(true);
    const lm = await createHandLandmarker({ modelDir: empty, warmUp: false });
    await lm.close();
  });
});
