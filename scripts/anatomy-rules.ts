/**
 * Anatomy rules from the hand landmarks (issue 28, item 3), measured as a veto would act: for each
 * candidate rule, how many of the engine's lines it would refuse on a part of the box set, split
 * into lines that agree with their box (eval:boxes' rule) and lines drawn wrong. A rule worth
 * building refuses wrong lines and no agreeing ones. docs/decisions/anatomy-veto.md quotes it.
 *
 *     node --import tsx scripts/anatomy-rules.ts [--part train,heldout] [--model path]
 *
 * The two rules the engine applies (src/inference/anatomy.ts, called here) refuse their lines
 * before this script sees them: on such an engine they read 0 / 0 here, and what they refuse is
 * counted by eval:boxes as `implausible`.
 *
 * Lengths are in palm lengths (wrist to middle knuckle, landmarks 0 and 9), in the hand's own frame:
 * +y from the wrist toward the middle knuckle, +x toward the index side.
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { LINE_NAMES, type LineName } from "../src/inference/analyzer-types.js";
import { implausibleCourse } from "../src/inference/anatomy.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import type { Point } from "../src/landmarks/geometry.js";
import { palmFrame } from "../src/landmarks/palm-frame.js";
import { BOX_DIR, partOf, readBoxes } from "./box-set.js";
import { scriptArgs } from "./cli.js";
import { maskAgreement } from "./eval-boxes.js";

/** handFrame maps image points into the hand's frame (see the file's comment), on the engine's palm-frame axes. */
export function handFrame(landmarks: readonly Point[]): (p: Point) => Point {
  const [w, m] = [landmarks[0], landmarks[9]];
  const d = Math.max(Math.hypot(m[0] - w[0], m[1] - w[1]), 1e-6);
  // palmFrame's +y runs toward the wrist; here +y runs toward the knuckles.
  const { ex, ey } = palmFrame(landmarks);
  return ([x, y]) => [((x - w[0]) * ex[0] + (y - w[1]) * ex[1]) / d, -((x - w[0]) * ey[0] + (y - w[1]) * ey[1]) / d];
}

function segmentDistance(p: Point, a: Point, b: Point): number {
  const [abx, aby] = [b[0] - a[0], b[1] - a[1]];
  const t = Math.min(1, Math.max(0, ((p[0] - a[0]) * abx + (p[1] - a[1]) * aby) / Math.max(abx * abx + aby * aby, 1e-12)));
  return Math.hypot(p[0] - a[0] - t * abx, p[1] - a[1] - t * aby);
}

/** thumbSide: > 0 for a point beyond the thumb's metacarpal axis (landmarks 1 to 2), away from the palm. */
function thumbSide(L: readonly Point[]): (p: Point) => number {
  const [a, b] = [L[1], L[2]];
  let n: Point = [-(b[1] - a[1]), b[0] - a[0]];
  const centre = [0, 5, 9, 13, 17].reduce<Point>((s, i) => [s[0] + L[i][0] / 5, s[1] + L[i][1] / 5], [0, 0]);
  if ((centre[0] - a[0]) * n[0] + (centre[1] - a[1]) * n[1] > 0) n = [-n[0], -n[1]];
  return (p) => (p[0] - a[0]) * n[0] + (p[1] - a[1]) * n[1];
}

/** resample places n + 1 points evenly along the polyline P, by length. */
function resample(P: Point[], n: number): Point[] {
  const cum = [0];
  for (let i = 1; i < P.length; i++) cum.push(cum[i - 1] + Math.hypot(P[i][0] - P[i - 1][0], P[i][1] - P[i - 1][1]));
  const total = cum[cum.length - 1];
  const out: Point[] = [];
  for (let k = 0, i = 1; k <= n; k++) {
    const t = (total * k) / n;
    while (i < P.length - 1 && cum[i] < t) i++;
    const f = (t - cum[i - 1]) / Math.max(1e-12, cum[i] - cum[i - 1]);
    out.push([P[i - 1][0] + (P[i][0] - P[i - 1][0]) * f, P[i - 1][1] + (P[i][1] - P[i - 1][1]) * f]);
  }
  return out;
}

/**
 * hooked: an end of the course turns by at least `degrees`: the direction of its last sixth
 * (by length) against that of the sixth before it, at either end. The issue's "a faint line
 * followed past its end into another crease ends in a hook".
 */
function hooked(P: Point[], degrees: number): boolean {
  if (P.length < 3) return false;
  const R = resample(P, 12);
  const dir = (a: Point, b: Point) => Math.atan2(b[1] - a[1], b[0] - a[0]);
  const turn = (a: number, b: number) => Math.abs(((b - a + 3 * Math.PI) % (2 * Math.PI)) - Math.PI);
  const limit = (degrees * Math.PI) / 180;
  return turn(dir(R[8], R[10]), dir(R[10], R[12])) >= limit || turn(dir(R[4], R[2]), dir(R[2], R[0])) >= limit;
}

/** A candidate rule: true when it would refuse the line (course P and landmarks L, both in the hand frame). */
type Rule = { line: LineName; name: string; refuses: (P: Point[], L: Point[]) => boolean };

export const RULES: Rule[] = [
  { line: "life", name: "on the thumb (beyond the axis of landmarks 1-2)", refuses: (P, L) => P.some((p) => thumbSide(L)(p) > 0) },
  {
    line: "life",
    name: "within 0.1 of the thumb's metacarpal (1-2)",
    refuses: (P, L) => P.some((p) => segmentDistance(p, L[1], L[2]) < 0.1),
  },
  {
    line: "life",
    name: "never below the thumb's knuckle (2): does not bound its ball",
    refuses: (P, L) => Math.min(...P.map((p) => p[1])) > L[2][1],
  },
  {
    line: "life",
    name: "starts on the little-finger half (start x below the middle of 5 and 17; built, anatomy.ts)",
    refuses: (P, L) => implausibleCourse("life", P, (L[5][0] + L[17][0]) / 2),
  },
  { line: "head", name: "on the thumb (beyond the axis of landmarks 1-2)", refuses: (P, L) => P.some((p) => thumbSide(L)(p) > 0) },
  {
    line: "heart",
    name: "starts on the index half (start x above the middle of 5 and 17; built, anatomy.ts)",
    refuses: (P, L) => implausibleCourse("heart", P, (L[5][0] + L[17][0]) / 2),
  },
  { line: "heart", name: "reaches below the wrist-to-knuckle midpoint (y < 0.5)", refuses: (P) => P.some((p) => p[1] < 0.5) },
  ...LINE_NAMES.map((line) => ({
    line,
    name: "ends in a hook (an end's last sixth turns 45 degrees or more)",
    refuses: (P: Point[]) => hooked(P, 45),
  })),
];

/** polylineDistance: the distance from p to the nearest segment of the polyline Q. */
function polylineDistance(p: Point, Q: Point[]): number {
  if (Q.length === 1) return Math.hypot(p[0] - Q[0][0], p[1] - Q[0][1]);
  let best = Number.POSITIVE_INFINITY;
  for (let i = 1; i < Q.length; i++) best = Math.min(best, segmentDistance(p, Q[i - 1], Q[i]));
  return best;
}

function median(v: number[]): number {
  const s = [...v].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

/** A candidate rule on the heart and head lines together: true when it would refuse both. */
type PairRule = { name: string; refuses: (heart: Point[], head: Point[]) => boolean };

export const PAIR_RULES: PairRule[] = [
  {
    name: "heart nearer the wrist than head where both run (most of their shared width)",
    refuses: (H, D) => {
      // Each heart point against the head point nearest it across the palm (x), inside their shared x range.
      const [h, d] = [resample(H, 24), resample(D, 24)];
      const [lo, hi] = [
        Math.max(Math.min(...h.map((p) => p[0])), Math.min(...d.map((p) => p[0]))),
        Math.min(Math.max(...h.map((p) => p[0])), Math.max(...d.map((p) => p[0]))),
      ];
      const shared = h.filter((p) => p[0] >= lo && p[0] <= hi);
      if (hi - lo < 0.1 || shared.length === 0) return false;
      const below = shared.filter((p) => p[1] < d.reduce((a, q) => (Math.abs(q[0] - p[0]) < Math.abs(a[0] - p[0]) ? q : a))[1]);
      return below.length > shared.length / 2;
    },
  },
  ...[0.04, 0.08].map((limit) => ({
    name: `heart and head merged (median distance of the shorter to the other under ${limit})`,
    refuses: (H: Point[], D: Point[]) => {
      const [a, b] = H.length <= D.length ? [resample(H, 12), D] : [resample(D, 12), H];
      return median(a.map((p) => polylineDistance(p, b))) < limit;
    },
  })),
];

async function main(): Promise<number> {
  const args = scriptArgs("usage: node --import tsx scripts/anatomy-rules.ts [--part train,heldout] [--model FILE]", {
    options: { part: { type: "string", default: "train,heldout" }, model: { type: "string" } },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  if (!existsSync(join(BOX_DIR, "boxes.csv"))) {
    console.log(`anatomy-rules: ${BOX_DIR} is absent; nothing to measure.`);
    return 0;
  }
  const parts = values.part.split(",");
  const boxes = new Map([...readBoxes()].filter(([file]) => parts.includes(partOf(file))));
  const analyzer = await createAnalyzer({ modelPath: values.model, workers: 1 });
  const tally = RULES.map(() => ({ agree: [] as string[], wrong: [] as string[] }));
  const pairTally = PAIR_RULES.map(() => ({ agree: [] as string[], wrong: [] as string[] }));
  const lines = { agree: 0, wrong: 0 };
  try {
    console.log(`model ${analyzer.model}; box set part '${values.part}', ${boxes.size} photos`);
    for (const file of [...boxes.keys()].sort()) {
      const result = await analyzer.analyze(await readFile(join(BOX_DIR, "images", file)));
      if (!result.hand) continue;
      const toHand = handFrame(result.hand.landmarks);
      const L = result.hand.landmarks.map(toHand);
      const seen = new Map<LineName, { P: Point[]; side: "agree" | "wrong" }>();
      for (const line of LINE_NAMES) {
        const stats = result.stats[line];
        const box = boxes.get(file)![line];
        if (!stats.detected || !box) continue;
        const side = (await maskAgreement(result.masks[line], box)).agrees ? "agree" : "wrong";
        lines[side]++;
        const P = stats.polyline.map(toHand);
        seen.set(line, { P, side });
        RULES.forEach((rule, i) => {
          if (rule.line === line && rule.refuses(P, L)) tally[i][side].push(file);
        });
      }
      const [heart, head] = [seen.get("heart"), seen.get("head")];
      if (heart && head && heart.P.length > 0 && head.P.length > 0) {
        PAIR_RULES.forEach((rule, i) => {
          if (!rule.refuses(heart.P, head.P)) return;
          pairTally[i][heart.side].push(`${file} heart`);
          pairTally[i][head.side].push(`${file} head`);
        });
      }
    }
  } finally {
    await analyzer.close();
  }
  console.log(`lines with a box: ${lines.agree} agree, ${lines.wrong} drawn wrong`);
  console.log(`${"line".padEnd(6)} ${"refuses agreeing".padStart(16)} ${"refuses wrong".padStart(14)}  rule (photos refused)`);
  const row = (line: string, name: string, { agree, wrong }: { agree: string[]; wrong: string[] }, shown: number) => {
    const list = [...agree.map((f) => `${f} agrees`), ...wrong.map((f) => `${f} wrong`)].slice(0, shown).join(", ");
    console.log(
      `${line.padEnd(6)} ${String(agree.length).padStart(16)} ${String(wrong.length).padStart(14)}  ${name}${list ? ` (${list})` : ""}`,
    );
  };
  for (const [i, rule] of RULES.entries()) row(rule.line, rule.name, tally[i], 6);
  for (const [i, rule] of PAIR_RULES.entries()) row("pair", rule.name, pairTally[i], 8);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
