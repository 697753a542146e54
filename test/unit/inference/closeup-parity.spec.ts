/**
 * The close-ups the line model is trained on (training/train_real.py `closeup_mask`, --closeup) are
 * the close-ups eval:boxes cuts (scripts/eval-boxes.ts `closeupSquare`): the square around the
 * lines' boxes in the photo's axes, grown by the margin on each side, seen in the canonical view
 * (turned and mirrored). Both are run on the same boxes and frame; every view pixel farther than a
 * photo pixel from the square's edge must be kept or cut alike.
 */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { PYTHON, pythonImports, repoRoot } from "../../helpers/python.js";
import { type PalmFrame, frameToImage, imageToFrame } from "../../../src/landmarks/palm-frame.js";
import { closeupSquare } from "../../../scripts/eval-boxes.js";
import { type Box, boundsOf } from "../../../scripts/box-set.js";

const S = 256;
const hasTorch = pythonImports("close-up parity", ["torch", "numpy", "cv2"]);

/** A palm's heart, head and life boxes in a 640 x 640 photo. */
const BOXES: Box[] = [
  [236, 190, 452, 262],
  [214, 248, 430, 318],
  [190, 262, 318, 478],
];

/** A frame turned by `deg` degrees, mirrored or not, its side `side` photo pixels. */
function frame(deg: number, mirrored: boolean, side: number): PalmFrame {
  const a = (deg * Math.PI) / 180;
  const ey: [number, number] = [-Math.sin(a), Math.cos(a)];
  const ex: [number, number] = mirrored ? [-Math.cos(a), -Math.sin(a)] : [Math.cos(a), Math.sin(a)];
  return { centre: [322, 330], ex, ey, side, mirrored };
}

/** The Python close-up mask of the view, for the boxes' quads in `f` (as training/box_views.ts maps them). */
function pythonMask(f: PalmFrame, margin: number): number[][] {
  const quads = BOXES.map(([x0, y0, x1, y1]) =>
    [
      [x0, y0],
      [x1, y0],
      [x1, y1],
      [x0, y1],
    ].map(([x, y]) => imageToFrame(f, S, x, y)),
  );
  const code =
    "import json, sys; from training.train_real import closeup_mask; a = json.load(sys.stdin); " +
    "print(json.dumps(closeup_mask(a['quads'], a['size'], a['margin']).tolist()))";
  const out = execFileSync(PYTHON, ["-c", code], { cwd: repoRoot, input: JSON.stringify({ quads, size: S, margin }), maxBuffer: 1 << 24 });
  return JSON.parse(out.toString());
}

describe.skipIf(!hasTorch)("the training close-up and eval:boxes' close-up", () => {
  it.each([
    { deg: 0, mirrored: false, margin: 0.1 },
    { deg: 33, mirrored: true, margin: 0.1 },
    { deg: -120, mirrored: false, margin: 0.25 },
  ])("keep the same part of the view (turned $deg, mirrored $mirrored, margin $margin)", ({ deg, mirrored, margin }) => {
    const f = frame(deg, mirrored, 420);
    const { cx, cy, side } = closeupSquare(boundsOf(BOXES), margin);
    const mask = pythonMask(f, margin);
    let compared = 0;
    let kept = 0;
    const differ: string[] = [];
    for (let v = 0; v < S; v++) {
      for (let u = 0; u < S; u++) {
        const [x, y] = frameToImage(f, S, u, v);
        const edge = side / 2 - Math.max(Math.abs(x - cx), Math.abs(y - cy));
        if (Math.abs(edge) <= 1) continue; // within a photo pixel of the square's edge: rounding decides
        compared++;
        if (edge > 0) kept++;
        if ((edge > 0 ? 1 : 0) !== mask[v][u]) differ.push(`${u},${v}`);
      }
    }
    expect(differ).toEqual([]);
    // The square is neither the whole view nor nothing of it.
    expect(kept).toBeGreaterThan(0.2 * compared);
    expect(kept).toBeLessThan(0.9 * compared);
  });
});
