/**
 * `training.step_cost` times training steps under the names given in `--configs`; a name it cannot read
 * exactly is refused before anything is timed, so a misspelt `bf16` is never reported as float32's time.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { PYTHON, pythonImports, repoRoot } from "../../helpers/python.js";

const hasTorch = pythonImports("step_cost", ["torch"]);

describe.skipIf(!hasTorch)("training/step_cost.py --configs", () => {
  it.each(["256:1:bf61", "256:1:bf16:x", "256", "256:hand,384:0.5:cl:bf16", "big:1", "256:wide", "256:inf", "256:nan"])(
    "refuses %s and times nothing",
    (configs) => {
      const run = spawnSync(PYTHON, ["-m", "training.step_cost", "--configs", configs, "--rounds", "0"], {
        cwd: repoRoot,
        encoding: "utf8",
      });
      expect(run.status).toBe(2);
      expect(run.stderr).toMatch(/SIZE:WIDTH with an optional third field, bf16 or cl .*; WIDTH a number or hand/);
      expect(run.stderr).not.toMatch(/Traceback/);
      expect(run.stdout).toBe("");
    },
    60_000,
  );
});
