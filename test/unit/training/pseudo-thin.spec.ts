/**
 * `train_real --pseudo-thin` cuts a teacher's line to its ridge before it becomes a pseudo-label: a
 * from-nothing teacher draws its lines 4.6-5% of the palm width thick against the released model's
 * 3-3.4%, and a student pulled to a thick line draws it thick. The ridge and the faint end a line is
 * grown along must survive the cut, or the student learns shorter lines instead of thinner ones.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { PYTHON, pythonImports, repoRoot } from "../../helpers/python.js";

const hasPackages = pythonImports("pseudo-thin", ["torch", "numpy", "cv2", "skimage"]);

// A slightly bent line across a 256 px view, its probability a Gaussian across it of the given sigma,
// and fading along its last quarter to 0.1; printed: the pixels over 0.15 across it at x = 100 before
// and after thinning, the highest value there before and after, and the value at the faint end.
const SCRIPT = `
import json, sys
import numpy as np
from training.train_real import thin_pseudo
sigma = float(sys.argv[1])
yy, xx = np.mgrid[0:256, 0:256].astype(np.float64)
centre = 120 + 0.001 * (xx - 128) ** 2
along = np.clip((200 - xx) / 40, 0.1 / 0.95, 1.0)
p = 0.95 * np.exp(-0.5 * ((yy - centre) / sigma) ** 2) * np.where((xx > 40) & (xx < 220), along, 0)
t = np.round(p * 255).astype(np.uint8)
o = thin_pseudo(t)
col_t, col_o = t[:, 100], o[:, 100]
print(json.dumps({"before": int((col_t >= 38).sum()), "after": int((col_o >= 38).sum()),
                  "peak_before": int(col_t.max()), "peak_after": int(col_o.max()),
                  "end_before": int(t[:, 215].max()), "end_after": int(o[:, 215].max()),
                  "dtype": str(o.dtype), "shape": list(o.shape)}))
`;

function thin(sigma: number) {
  const run = spawnSync(PYTHON, ["-c", SCRIPT, String(sigma)], { cwd: repoRoot, encoding: "utf8" });
  expect(run.stderr).not.toMatch(/Traceback/);
  expect(run.status).toBe(0);
  return JSON.parse(run.stdout);
}

describe.skipIf(!hasPackages)("training/train_real.py thin_pseudo", () => {
  it("cuts a thick line to 3 px and keeps its ridge and its faint end", () => {
    const r = thin(2.5);
    expect(r.before).toBeGreaterThanOrEqual(9);
    expect(r.after).toBe(3);
    expect(r.peak_after).toBe(r.peak_before);
    expect(r.end_after).toBe(r.end_before);
    expect(r.dtype).toBe("uint8");
    expect(r.shape).toEqual([256, 256]);
  }, 60_000);

  it("leaves a line that is already 3 px wide as it is", () => {
    const r = thin(0.7);
    expect(r.before).toBe(3);
    expect(r.after).toBe(3);
    expect(r.peak_after).toBe(r.peak_before);
  }, 60_000);
});
