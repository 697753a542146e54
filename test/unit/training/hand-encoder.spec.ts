/**
 * training/hand_encoder.py reads the hand-landmark model (converted from the installed
 * @mediapipe/hands package) into torch, so that a line model can start from its features
 * (training/model.py HandUNet). Its torch form must compute what onnxruntime computes from the
 * same file, or the features it trains on are not the model's.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { PYTHON, pythonImports, repoRoot } from "../../helpers/python.js";

const hasTorch = pythonImports("hand encoder", ["torch", "onnx"]);

describe.skipIf(!hasTorch)("training/hand_encoder.py", () => {
  it("gives onnxruntime's landmarks, presence and handedness from the hand model's torch form", () => {
    const run = spawnSync(PYTHON, ["-m", "training.hand_encoder", "--check"], {
      cwd: repoRoot,
      encoding: "utf8",
      env: { ...process.env, OMP_NUM_THREADS: "1" },
    });
    expect(run.stderr).not.toMatch(/Traceback/);
    const lines = run.stdout.trim().split("\n");
    // The four block ends a decoder takes, at 1/2, 1/4, 1/8 and 1/16 of the input.
    expect(lines.filter((l) => l.startsWith("tap ")).map((l) => l.replace(/^tap \S+: /, ""))).toEqual([
      "16 channels at 1/2",
      "24 channels at 1/4",
      "40 channels at 1/8",
      "112 channels at 1/16",
    ]);
    const worst: Record<string, number> = JSON.parse(lines[lines.length - 1]);
    expect(Object.keys(worst).sort()).toEqual(["handedness", "landmarks", "presence", "world_landmarks"]);
    // Landmarks are in input pixels (0-224): a thousandth of a pixel is float32 rounding, not another network.
    for (const v of Object.values(worst)) expect(v).toBeLessThan(1e-3);
    expect(run.status).toBe(0);
  }, 60_000);
});
