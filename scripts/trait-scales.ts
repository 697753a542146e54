/**
 * The trait scales on real palms: how the depth and curvature of the lines the engine draws on a
 * part of the box set spread (their tenth, third, half, two-thirds and ninth tenth, and how many
 * lines each word of line-traits.ts's scales gets) and the gap between head and life line's starts, and with --turned how far each moves when the
 * photo is turned by 90 degrees. DEPTH_SCALE is the thirds of the training part's depths
 * (docs/decisions/crease-depth.md); the evaluation quarter is never read here.
 *
 *     node --import tsx scripts/trait-scales.ts [--part train|heldout] [--limit N] [--turned]
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import sharp from "sharp";
import { LINE_NAMES } from "../src/inference/analyzer-types.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import { CURVATURE_SCALE, DEPTH_SCALE, JOINED_GAP } from "../src/inference/line-traits.js";
import { BOX_DIR, partOf, readBoxes } from "./box-set.js";

const QUANTILES = [0.1, 1 / 3, 0.5, 2 / 3, 0.9];

function quantile(sorted: readonly number[], p: number): number {
  return sorted.length ? sorted[Math.floor(p * (sorted.length - 1))] : Number.NaN;
}

function spread(name: string, values: number[], scale: readonly [number, number], words: readonly string[]): void {
  const s = [...values].sort((a, b) => a - b);
  const counts = [
    s.filter((x) => x < scale[0]).length,
    s.filter((x) => x >= scale[0] && x < scale[1]).length,
    s.filter((x) => x >= scale[1]).length,
  ];
  console.log(
    `${name.padEnd(10)} ${String(s.length).padStart(5)} lines; quantiles ${QUANTILES.map((p) => quantile(s, p).toFixed(3)).join(" / ")}; ` +
      `words at [${scale.join(", ")}]: ${words.map((w, i) => `${w} ${counts[i]}`).join(", ")}`,
  );
}

/**
 * moved: how far a trait moves between the photo as taken and turned, against the trait's own
 * spread (interquartile range), and how many lines change their word on `scale`.
 */
function moved(name: string, pairs: [number, number][], bound: number, scale: readonly [number, number]): void {
  const word = (x: number) => (x < scale[0] ? 0 : x < scale[1] ? 1 : 2);
  const all = pairs.flat().sort((a, b) => a - b);
  const iqr = quantile(all, 0.75) - quantile(all, 0.25);
  const d = pairs.map(([a, b]) => Math.abs(a - b)).sort((a, b) => a - b);
  console.log(
    `${name.padEnd(10)} turned: ${pairs.length} lines; |moved| median ${quantile(d, 0.5).toFixed(4)}, ninth tenth ${quantile(d, 0.9).toFixed(4)} ` +
      `(${(quantile(d, 0.9) / iqr).toFixed(3)} of the spread ${iqr.toFixed(3)}); over ${bound}: ${d.filter((x) => x > bound).length}; ` +
      `over a quarter of the spread: ${d.filter((x) => x > iqr / 4).length}; word changed: ${pairs.filter(([a, b]) => word(a) !== word(b)).length}`,
  );
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: { part: { type: "string", default: "train" }, limit: { type: "string" }, turned: { type: "boolean" } },
  });
  if (values.part === "eval") throw new Error("trait-scales: the evaluation quarter is not for choosing scales");
  if (!existsSync(join(BOX_DIR, "boxes.csv"))) {
    console.log(`trait-scales: ${BOX_DIR} is absent; nothing to measure.`);
    return 0;
  }
  const files = [...readBoxes().keys()]
    .filter((f) => partOf(f) === values.part)
    .sort()
    .slice(0, values.limit ? Number(values.limit) : undefined);
  const analyzer = await createAnalyzer({ workers: 1 });
  const depth: number[] = [];
  const curvature: number[] = [];
  const depthPairs: [number, number][] = [];
  const curvaturePairs: [number, number][] = [];
  const gaps: number[] = [];
  try {
    console.log(`model ${analyzer.model}; box set part '${values.part}', ${files.length} photos`);
    for (const file of files) {
      const bytes = await readFile(join(BOX_DIR, "images", file));
      const taken = await analyzer.analyze(bytes);
      if (taken.headLifeStart) gaps.push(taken.headLifeStart.gap);
      const turned = values.turned ? await analyzer.analyze(await sharp(bytes).rotate().rotate(90).png().toBuffer()) : undefined;
      for (const line of LINE_NAMES) {
        const t = taken.stats[line].traits;
        if (!t) continue;
        depth.push(t.depth);
        curvature.push(t.curvature);
        const u = turned?.stats[line].traits;
        if (!u) continue;
        depthPairs.push([t.depth, u.depth]);
        curvaturePairs.push([t.curvature, u.curvature]);
      }
    }
  } finally {
    await analyzer.close();
  }
  spread("depth", depth, DEPTH_SCALE, ["faint", "medium", "deep"]);
  spread("curvature", curvature, CURVATURE_SCALE, ["straight", "curved", "strongly_curved"]);
  const g = [...gaps].sort((a, b) => a - b);
  console.log(
    `head-life  ${String(g.length).padStart(5)} photos with both; gap quantiles ${QUANTILES.map((p) => quantile(g, p).toFixed(3)).join(" / ")}; ` +
      `joined (gap <= ${JOINED_GAP}): ${g.filter((x) => x <= JOINED_GAP).length}`,
  );
  if (values.turned) {
    moved("depth", depthPairs, 0.02, DEPTH_SCALE);
    moved("curvature", curvaturePairs, 0.02, CURVATURE_SCALE);
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
