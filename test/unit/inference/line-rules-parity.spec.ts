/**
 * The engine's line rules (src/inference/postprocess.ts) and the training evaluation's
 * (training/line_rules.py) read one table (src/inference/line-rules.json) and must agree pixel
 * for pixel: both run on the same probability maps, with the released model's thresholds, and
 * every outcome is compared (palm share; per line detected, why not, the kept and the grown
 * pixels). The maps are drawn here: designed ones that put each rule on both sides of its limit,
 * and seeded random ones; once for the engine's frame and once for a model framed at 1.3 palm
 * sizes, whose rules span the same share of the palm (ruleUnit).
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { PYTHON, pythonImports, repoRoot } from "../../helpers/python.js";
import { LINE_NAMES, type LineName } from "../../../src/inference/analyzer-types.js";
import { DEFAULT_MODEL_PATH } from "../../../src/inference/model-session.js";
import { FRAME_SIDE } from "../../../src/landmarks/palm-frame.js";
import { parseModelMetadata, readOnnxMetadataProps } from "../../../src/inference/model-metadata.js";
import { LINE_RULES, growLine, palmDistanceMap, palmShare, ruleUnit, selectLine } from "../../../src/inference/postprocess.js";

const S = 256;
const meta = parseModelMetadata(readOnnxMetadataProps(readFileSync(DEFAULT_MODEL_PATH)));
/** The smallest component that is not a speck, in pixels. */
const SPECK = Math.ceil(Math.max(LINE_RULES.speckMinPixels, meta.detection.minPixels * LINE_RULES.speckShare));

const hasNumpy = pythonImports("line-rules parity", ["numpy", "cv2"]);

type Pt = [number, number];
/** One map: channel 0 palm, 1-3 heart, head, life. */
type Maps = Float32Array[];

/** mulberry32: a small seeded generator, so that the random maps are the same every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function blank(): Maps {
  return Array.from({ length: 4 }, () => new Float32Array(S * S));
}

/** palm paints an elliptic palm (centre, radii) with a soft edge into channel 0. */
function palm(m: Maps, cx: number, cy: number, rx: number, ry: number): void {
  for (let y = 0; y < S; y++)
    for (let x = 0; x < S; x++) {
      const r = Math.hypot((x - cx) / rx, (y - cy) / ry);
      m[0][y * S + x] = Math.max(m[0][y * S + x], 1 / (1 + Math.exp((r - 1) * 14)));
    }
}

/** stroke paints a crease along the polyline: a Gaussian cross-section of width sigma and height peak. */
function stroke(ch: Float32Array, pts: Pt[], peak: number, sigma = 1.6): void {
  for (let y = 0; y < S; y++)
    for (let x = 0; x < S; x++) {
      let d = Infinity;
      for (let i = 0; i + 1 < pts.length; i++) {
        const [ax, ay] = pts[i];
        const [bx, by] = pts[i + 1];
        const len2 = (bx - ax) ** 2 + (by - ay) ** 2;
        const t = len2 > 0 ? Math.max(0, Math.min(1, ((x - ax) * (bx - ax) + (y - ay) * (by - ay)) / len2)) : 0;
        d = Math.min(d, Math.hypot(x - ax - t * (bx - ax), y - ay - t * (by - ay)));
      }
      if (d < 4 * sigma) ch[y * S + x] = Math.max(ch[y * S + x], peak * Math.exp(-(d * d) / (2 * sigma * sigma)));
    }
}

/** The gaps (px between the strokes' centre lines) of the family "a piece N px after the end", across piece_gap. */
const PIECE_GAPS = [13, 18, 21, 24, 27, 28, 30, 34];

/** The designed maps: each rule of selectLine and growLine met and missed. */
// biome-ignore format: the polylines read best one stroke per line
function designed(): { name: string; maps: Maps }[] {
  const out: { name: string; maps: Maps }[] = [];
  const add = (name: string, draw: (m: Maps) => void, withPalm = true) => {
    const m = blank();
    if (withPalm) palm(m, 128, 140, 80, 90);
    draw(m);
    out.push({ name, maps: m });
  };
  const [, heart, head, life] = [0, 1, 2, 3];
  add("three clean lines", (m) => {
    stroke(m[heart], [[70, 95], [120, 88], [180, 100]], 0.95);
    stroke(m[head], [[75, 125], [130, 130], [175, 150]], 0.9);
    stroke(m[life], [[95, 110], [85, 160], [110, 210]], 0.92);
  });
  add("a piece continuing past the end is kept; one alongside is not", (m) => {
    stroke(m[heart], [[70, 95], [120, 90]], 0.95);
    stroke(m[heart], [[128, 90], [175, 98]], 0.9); // beyond the end, along the line
    stroke(m[heart], [[80, 104], [112, 100]], 0.9); // alongside, within its length
    stroke(m[head], [[75, 125], [115, 130]], 0.9);
    stroke(m[head], [[148, 136], [183, 152]], 0.9); // too far (past the piece gap)
    stroke(m[life], [[95, 110], [90, 150]], 0.92);
    stroke(m[life], [[92, 156], [94, 162]], 0.92); // a short piece past the end
  });
  add("creases off the palm are implausible", (m) => {
    stroke(m[heart], [[30, 20], [60, 15]], 0.95); // a finger, far from the palm
    stroke(m[head], [[40, 60], [60, 45], [80, 40]], 0.9); // half on the palm edge
    stroke(m[life], [[200, 230], [230, 245]], 0.9); // the wrist
  });
  add("weak lines and specks", (m) => {
    stroke(m[heart], [[70, 95], [180, 100]], 0.62); // above the threshold, low mean
    stroke(m[head], [[100, 130], [101, 131]], 0.9, 0.8); // a speck
    stroke(m[life], [[90, 120], [92, 190]], 0.4); // below any threshold
  });
  add("faint tails are followed (grow) only on the palm", (m) => {
    stroke(m[heart], [[70, 95], [125, 90]], 0.95);
    stroke(m[heart], [[125, 90], [185, 100]], 0.5 * (meta.thresholds.heart + meta.grow.heart), 1.4);
    stroke(m[head], [[75, 125], [130, 130]], 0.9);
    stroke(m[head], [[130, 130], [215, 150], [250, 160]], 0.5 * (meta.thresholds.head + meta.grow.head), 1.4);
    stroke(m[life], [[95, 110], [88, 165]], 0.92);
    stroke(m[life], [[88, 165], [110, 215]], 0.95 * meta.grow.life, 1.4); // just under grow: not followed
  });
  add(
    "no palm at all: every component is plausible",
    (m) => {
      stroke(m[heart], [[70, 95], [180, 100]], 0.95);
      stroke(m[head], [[20, 20], [60, 25]], 0.9);
    },
    false,
  );
  add("a palm too small to confirm", (m) => {
    m[0].fill(0);
    palm(m, 128, 128, 12, 10);
    stroke(m[life], [[120, 120], [125, 140]], 0.9);
  });
  // A speck is a component under max(speck_min_pixels, speck_share x min_pixels) pixels: one just under
  // that size and one at it (too few to detect), whatever min_pixels the released calibration has.
  add(`specks of ${SPECK - 1} and ${SPECK} pixels`, (m) => {
    m[heart].fill(0.9, 120 * S + 100, 120 * S + 100 + SPECK - 1);
    m[head].fill(0.9, 130 * S + 100, 130 * S + 100 + SPECK);
  });
  // Families that sweep one rule across its limit, a step per map (lengths in pixels at S = 256).
  for (const k of [4, 5, 6, 7, 8, 10, 12, 14, 17]) {
    add(`a piece reaching ${k} px past the end`, (m) => {
      stroke(m[heart], [[70, 95], [110, 95]], 0.95);
      stroke(m[heart], [[112, 101], [110 + k, 125]], 0.9);
    });
  }
  for (const d of [0, 2, 4, 6, 8, 10]) {
    add(`a piece ${d} px aside the end of a bent line`, (m) => {
      stroke(m[heart], [[70, 95], [104, 95], [112, 104]], 0.95);
      stroke(m[heart], [[106 + d, 114], [104 + d, 136]], 0.9);
    });
  }
  for (const g of PIECE_GAPS) {
    add(`a piece ${g} px after the end`, (m) => {
      stroke(m[head], [[70, 125], [110, 125]], 0.9);
      stroke(m[head], [[110 + g, 125], [150 + g, 127]], 0.9);
    });
  }
  for (const len of [4, 7, 9, 11, 14]) {
    add(`a piece ${len} px long`, (m) => {
      stroke(m[life], [[95, 110], [92, 150]], 0.92);
      stroke(m[life], [[92, 156], [92, 156 + len]], 0.92);
    });
  }
  for (const x of [36, 40, 44, 48, 52, 56]) {
    add(`a crease crossing the palm's edge at x = ${x}`, (m) => {
      stroke(m[heart], [[x - 30, 120], [x + 30, 120]], 0.9);
    });
  }
  return out;
}

/** Seeded random maps: a palm, then per line a few creases of random course, strength and gaps. */
function random(seed: number): { name: string; maps: Maps } {
  const r = rng(seed);
  const m = blank();
  palm(m, 100 + 56 * r(), 110 + 50 * r(), 50 + 40 * r(), 60 + 40 * r());
  for (let ch = 1; ch <= 3; ch++) {
    for (let k = Math.floor(r() * 4); k >= 0; k--) {
      let p: Pt = [30 + 196 * r(), 30 + 196 * r()];
      const a = 2 * Math.PI * r();
      const pts: Pt[] = [p];
      for (let j = 0; j < 4; j++) {
        const turn = a + (r() - 0.5);
        p = [p[0] + 14 * Math.cos(turn), p[1] + 14 * Math.sin(turn)];
        pts.push(p);
      }
      stroke(m[ch], pts, 0.3 + 0.7 * r(), 1 + 1.2 * r());
    }
  }
  return { name: `random ${seed}`, maps: m };
}

interface Outcome {
  palm_share: number;
  lines: Record<LineName, { detected: boolean; why: string; kept: number[]; grown: number[] }>;
}

/** The engine's outcome on one map, in the Python script's terms, for a model framed at `frameSide` palm sizes. */
function engine(m: Maps, frameSide = FRAME_SIDE): Outcome {
  const unit = ruleUnit(S, frameSide);
  const palmDistance = palmDistanceMap(m[0], S, meta.thresholds.palm);
  const lines = {} as Outcome["lines"];
  for (const [i, line] of LINE_NAMES.entries()) {
    const sel = selectLine(m[i + 1], S, {
      threshold: meta.thresholds[line],
      minPixels: meta.detection.minPixels,
      minConfidence: meta.detection.minConfidence,
      palmDistance,
      unit,
    });
    const grown = sel.detected ? growLine(m[i + 1], sel.kept, S, meta.grow[line], palmDistance, unit) : sel.kept;
    const on = (mask: Uint8Array) => [...mask.keys()].filter((j) => mask[j]);
    lines[line] = { detected: sel.detected, why: sel.why, kept: on(sel.kept), grown: on(grown) };
  }
  return { palm_share: palmShare(m[0], S, meta.thresholds.palm), lines };
}

const cases = [...designed(), ...Array.from({ length: 12 }, (_, i) => random(i + 1))];
const dir = mkdtempSync(join(tmpdir(), "line-rules-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe.skipIf(!hasNumpy)("line rules: postprocess.ts and training/line_rules.py", () => {
  const ours = cases.map((c) => engine(c.maps));

  it("the maps put every rule on both sides of its limit", () => {
    const all = ours.flatMap((o) => LINE_NAMES.map((l) => o.lines[l]));
    expect(new Set(all.map((l) => l.why))).toEqual(new Set(["", "not_visible", "implausible", "low_confidence"]));
    const growth = all.filter((l) => l.detected && l.grown.length > l.kept.length);
    expect(growth.length, "lines grown along a faint tail").toBeGreaterThan(0);
    const broken = designed()[1];
    const heart = ours[1].lines.heart;
    expect(broken.name).toMatch(/piece/);
    // The piece past the end is kept (more pixels than the first stroke alone), the one alongside is not.
    expect(heart.detected).toBe(true);
    expect(
      heart.kept.some((j) => j % S > 150),
      "the piece past the end",
    ).toBe(true);
    expect(
      heart.kept.some((j) => Math.floor(j / S) >= 103 && j % S < 110 && j % S > 85),
      "the crease alongside",
    ).toBe(false);
    expect(ours[6].palm_share).toBeLessThan(meta.cropMinPalm);
    expect(SPECK, "a component of SPECK pixels is too few to detect").toBeLessThan(meta.detection.minPixels);
    expect(ours[7].lines.heart.why, `${SPECK - 1} pixels: a speck`).toBe("not_visible");
    expect(ours[7].lines.head.why, `${SPECK} pixels: too few`).toBe("low_confidence");
    // piece_gap (0.09 of S, 23 px between the parts above the threshold; the strokes' tails make it 27 px between
    // their centre lines): a broken line keeps both pieces up to that gap, not past it.
    const afterEnd = (g: number) => {
      const i = cases.findIndex((c) => c.name === `a piece ${g} px after the end`);
      const kept = ours[i].lines.head.kept;
      return kept.some((j) => j % S < 100) && kept.some((j) => j % S > 120 + g);
    };
    expect(PIECE_GAPS.map(afterEnd)).toEqual([true, true, true, true, true, false, false, false]);
  });

  it("a model framed at 1.3 joins a piece across the same share of the palm", () => {
    // At 1.3 palm sizes the palm is 1.7 / 1.3 times as large in the view, and so is the gap a piece may leave.
    const tight = cases.map((c) => engine(c.maps, 1.3));
    const afterEnd = (outcomes: Outcome[], g: number) => {
      const kept = outcomes[cases.findIndex((c) => c.name === `a piece ${g} px after the end`)].lines.head.kept;
      return kept.some((j) => j % S < 100) && kept.some((j) => j % S > 120 + g);
    };
    expect(PIECE_GAPS.map((g) => afterEnd(ours, g))).toEqual([true, true, true, true, true, false, false, false]);
    expect(PIECE_GAPS.map((g) => afterEnd(tight, g))).toEqual([true, true, true, true, true, true, true, true]);
  });

  const parity = (frameSide: number) => {
    const bin = join(dir, `maps-${frameSide}.bin`);
    const spec = join(dir, `spec-${frameSide}.json`);
    const all = new Float32Array(cases.length * 4 * S * S);
    for (const [i, c] of cases.entries()) for (const [k, ch] of c.maps.entries()) all.set(ch, (i * 4 + k) * S * S);
    writeFileSync(bin, Buffer.from(all.buffer));
    writeFileSync(
      spec,
      JSON.stringify({
        size: S,
        frame_side: frameSide,
        thresholds: meta.thresholds,
        detection: { min_pixels: meta.detection.minPixels, min_confidence: meta.detection.minConfidence },
        grow: meta.grow,
      }),
    );
    const theirs = JSON.parse(
      execFileSync(PYTHON, ["-m", "training.line_rules", bin, spec], { cwd: repoRoot, maxBuffer: 64 << 20, encoding: "utf8" }),
    ) as Outcome[];
    const mine = frameSide === FRAME_SIDE ? ours : cases.map((c) => engine(c.maps, frameSide));
    expect(theirs).toHaveLength(cases.length);
    cases.forEach((c, i) => {
      expect(theirs[i].palm_share, c.name).toBeCloseTo(mine[i].palm_share, 9);
      for (const line of LINE_NAMES) expect(theirs[i].lines[line], `${c.name}: ${line}`).toEqual(mine[i].lines[line]);
    });
  };

  it("gives the same outcome as the training evaluation on every map", () => parity(FRAME_SIDE), 120_000);

  it("gives the same outcome as the training evaluation for a model framed at 1.3", () => parity(1.3), 120_000);
});
