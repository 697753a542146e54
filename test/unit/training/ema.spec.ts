/**
 * `train_real --ema` keeps an exponential moving average of the weights beside training and writes it as
 * final_ema.pt, a checkpoint that export and evaluate read as they read final.pt. The average must follow
 * the weights by its decay (ramped over the first steps), survive a stop and resume unchanged, and load
 * into the network it came from.
 */
import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { PYTHON, pythonImports, repoRoot } from "../../helpers/python.js";

const hasPackages = pythonImports("ema", ["torch", "numpy", "cv2"]);

// Printed: how far the average is from weights held constant; the average of a weight that steps from 0 to 1,
// against the closed form of the ramped decay; the gap between an average resumed from its saved state and one
// that never stopped; and whether the averaged weights load into net_of's network and give its output's shape.
const SCRIPT = `
import json, torch
from training.model import PalmUNet, net_of
from training.train import WeightAverage
torch.manual_seed(0)
net = PalmUNet()
ema = WeightAverage(net, 0.9)
for _ in range(30):
    ema.update(net)
const_gap = max(float((ema.avg[k] - v).abs().max()) for k, v in net.state_dict().items() if v.is_floating_point())
with torch.no_grad():
    for p in net.parameters():
        p.zero_()
step = WeightAverage(net, 0.9)
for _ in range(100):
    step.update(net)
with torch.no_grad():
    for p in net.parameters():
        p.fill_(1.0)
kept = 1.0
for t in range(100, 110):
    step.update(net)
    kept *= min(0.9, (1 + t) / (10 + t))
k0 = next(k for k, _ in net.named_parameters())
stepped = float(step.avg[k0].flatten()[0])
a = WeightAverage(net, 0.98)
for _ in range(5):
    a.update(net)
b = WeightAverage(net, 0.98, a.state())
with torch.no_grad():
    for p in net.parameters():
        p.mul_(0.5)
for _ in range(7):
    a.update(net); b.update(net)
resume_gap = max(float((a.avg[k] - b.avg[k]).abs().max()) for k in a.avg)
sd = {"model": a.avg, "arch": net.arch}
other = net_of(sd)
other.load_state_dict(sd["model"])
other.eval()
out = other(torch.zeros(1, 3, 64, 64))
print(json.dumps({"const_gap": const_gap, "stepped": stepped, "expected": 1 - kept, "resume_gap": resume_gap,
                  "t": b.t, "out": list(out.shape)}))
`;

describe.skipIf(!hasPackages)("training/train.py WeightAverage", () => {
  it("follows the weights by its ramped decay, resumes exactly and loads as a checkpoint", () => {
    const run = spawnSync(PYTHON, ["-c", SCRIPT], { cwd: repoRoot, encoding: "utf8" });
    expect(run.stderr).not.toMatch(/Traceback/);
    expect(run.status).toBe(0);
    const r = JSON.parse(run.stdout);
    expect(r.const_gap).toBeLessThan(1e-6);
    // From 0 to 1, past the ramp: 10 updates at decay 0.9 hold 1 - 0.9^10 of the new weights, not all of them.
    expect(r.stepped).toBeGreaterThan(0.6);
    expect(r.stepped).toBeLessThan(0.7);
    expect(r.stepped).toBeCloseTo(r.expected, 5);
    expect(r.resume_gap).toBe(0);
    expect(r.t).toBe(12);
    expect(r.out).toEqual([1, 4, 64, 64]);
  }, 120_000);
});
