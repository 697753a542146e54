/**
 * The trait scales on real palms: how the depth and curvature of the lines the engine draws on a
 * part of the box set spread (their tenth, third, half, two-thirds and ninth tenth, and how many
 * lines get each word), and the gap between the head and life lines' starts; with --turned, how
 * far depth and curvature move when the photo is turned by 90 degrees. DEPTH_SCALE is the thirds
 * of the training part's depths (docs/decisions/crease-depth.md); the evaluation quarter is never
 * read here.
 *
 *     node --import tsx scripts/trait-scales.ts [--part train|heldout] [--limit N] [--turned]
 */
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { quantile } from "../bench/stats.js";
import { LINE_NAMES, type LineTraits } from "../src/inference/analyzer-types.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import { CURVATURE_SCALE, DEPTH_SCALE, JOINED_GAP } from "../src/inference/line-traits.js";
import { BOX_DIR, partOf, readBoxes } from "./box-set.js";
import { oneOf, scriptArgs } from "./cli.js";
import { TURN_BOUNDS, turned90 } from "./trait-stability.js";

const QUANTILES = [0.1, 1 / 3, 0.5, 2 / 3, 0.9];

/** A trait of one line as the answer gives it: its number and its word. */
type Reading = { value: number; word: string };

function spread(name: string, readings: Reading[], scale: readonly [number, number]): void {
  const words = new Map<string, number>();
  for (const r of readings) words.set(r.word, (words.get(r.word) ?? 0) + 1);
  const values = readings.map((r) => r.value);
  console.log(
    `${name.padEnd(10)} ${String(readings.length).padStart(5)} lines; quantiles ${QUANTILES.map((p) => quantile(values, p).toFixed(3)).join(" / ")}; ` +
      `words at [${scale.join(", ")}]: ${[...words].map(([w, n]) => `${w} ${n}`).join(", ")}`,
  );
}

/**
 * moved: how far a trait moves between the photo as taken and turned, against the trait's own
 * spread (interquartile range) and real-photos.spec's bound, and how many lines change their word.
 */
function moved(name: string, pairs: [Reading, Reading][], bound: number): void {
  const all = pairs.flatMap(([a, b]) => [a.value, b.value]);
  const iqr = quantile(all, 0.75) - quantile(all, 0.25);
  const d = pairs.map(([a, b]) => Math.abs(a.value - b.value));
  console.log(
    `${name.padEnd(10)} turned: ${pairs.length} lines; |moved| median ${quantile(d, 0.5).toFixed(4)}, ninth tenth ${quantile(d, 0.9).toFixed(4)} ` +
      `(${(quantile(d, 0.9) / iqr).toFixed(3)} of the spread ${iqr.toFixed(3)}); over ${bound}: ${d.filter((x) => x > bound).length}; ` +
      `over a quarter of the spread: ${d.filter((x) => x > iqr / 4).length}; word changed: ${pairs.filter(([a, b]) => a.word !== b.word).length}`,
  );
}

const USAGE = "usage: node --import tsx scripts/trait-scales.ts [--part train|heldout] [--limit N] [--turned]";

async function main(): Promise<number> {
  const args = scriptArgs(USAGE, {
    options: { part: { type: "string", default: "train" }, limit: { type: "string" }, turned: { type: "boolean" } },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  if (values.part === "eval") {
    console.error("trait-scales: the evaluation quarter is not for choosing scales");
    return 2;
  }
  if (!oneOf("--part", values.part, ["heldout", "train"], USAGE)) return 2;
  if (!existsSync(join(BOX_DIR, "boxes.csv"))) {
    console.log(`trait-scales: ${BOX_DIR} is absent; nothing to measure.`);
    return 0;
  }
  const files = [...readBoxes().keys()]
    .filter((f) => partOf(f) === values.part)
    .sort()
    .slice(0, values.limit ? Number(values.limit) : undefined);
  const analyzer = await createAnalyzer({ workers: 1 });
  const depth: Reading[] = [];
  const curvature: Reading[] = [];
  const depthPairs: [Reading, Reading][] = [];
  const curvaturePairs: [Reading, Reading][] = [];
  const depthOf = (t: LineTraits): Reading => ({ value: t.depth, word: t.depthLabel });
  const curvatureOf = (t: LineTraits): Reading => ({ value: t.curvature, word: t.curvatureLabel });
  const gaps: number[] = [];
  try {
    console.log(`model ${analyzer.model}; box set part '${values.part}', ${files.length} photos`);
    for (const file of files) {
      const bytes = await readFile(join(BOX_DIR, "images", file));
      const taken = await analyzer.analyze(bytes);
      if (taken.headLifeStart) gaps.push(taken.headLifeStart.gap);
      const turned = values.turned ? await analyzer.analyze(await turned90(bytes)) : undefined;
      for (const line of LINE_NAMES) {
        const t = taken.stats[line].traits;
        if (!t) continue;
        depth.push(depthOf(t));
        curvature.push(curvatureOf(t));
        const u = turned?.stats[line].traits;
        if (!u) continue;
        depthPairs.push([depthOf(t), depthOf(u)]);
        curvaturePairs.push([curvatureOf(t), curvatureOf(u)]);
      }
    }
  } finally {
    await analyzer.close();
  }
  spread("depth", depth, DEPTH_SCALE);
  spread("curvature", curvature, CURVATURE_SCALE);
  console.log(
    `head-life  ${String(gaps.length).padStart(5)} photos with both; gap quantiles ${QUANTILES.map((p) => quantile(gaps, p).toFixed(3)).join(" / ")}; ` +
      `joined (gap <= ${JOINED_GAP}): ${gaps.filter((x) => x <= JOINED_GAP).length}`,
  );
  if (values.turned) {
    moved("depth", depthPairs, TURN_BOUNDS.depth);
    moved("curvature", curvaturePairs, TURN_BOUNDS.curvature);
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
