/**
 * analyze: local command-line entry of the analysis engine.
 *
 *     npm run analyze -- <image> [--out dir] [--model path]
 *
 * Writes overlay.jpg, heart.png, head.png, life.png and stats.json (model, size, stats, hand, stage
 * timings) into the folder (default `out/<image name>`), and prints the stats.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { basename, extname, join, resolve } from "node:path";
import { parseArgs } from "node:util";
import { isImageError } from "../engine-errors.js";
import { LINE_NAMES } from "../inference/analyzer-types.js";
import { createAnalyzer } from "../inference/analyzer.js";
import type { StageTimings } from "../inference/pipeline.js";

const USAGE = "usage: npm run analyze -- <image.jpg|png> [--out dir] [--model model.onnx]";

/** runAnalyzeCli runs the command with `argv` (without node and script) and returns the exit code. */
export async function runAnalyzeCli(argv: string[]): Promise<number> {
  const spec = {
    args: argv,
    allowPositionals: true,
    options: { out: { type: "string" }, model: { type: "string" }, help: { type: "boolean", short: "h" } },
  } as const;
  let args: ReturnType<typeof parseArgs<typeof spec>>;
  try {
    args = parseArgs(spec);
  } catch (e) {
    console.error(`${(e as Error).message}\n${USAGE}`);
    return 2;
  }
  if (args.values.help || args.positionals.length !== 1) {
    console.error(USAGE);
    return args.values.help ? 0 : 2;
  }
  const imagePath = resolve(args.positionals[0]);
  const outDir = resolve(args.values.out ?? join("out", basename(imagePath, extname(imagePath))));
  let bytes: Buffer;
  try {
    bytes = await readFile(imagePath);
  } catch (e) {
    console.error(`cannot read ${imagePath}: ${(e as Error).message}`);
    return 1;
  }

  let timings: StageTimings | undefined;
  const analyzer = await createAnalyzer({
    modelPath: args.values.model,
    workers: 1,
    onTimings: (t) => (timings = t),
  });
  try {
    const result = await analyzer.analyze(bytes);
    await mkdir(outDir, { recursive: true });
    await writeFile(join(outDir, "overlay.jpg"), result.overlay);
    for (const line of LINE_NAMES) await writeFile(join(outDir, `${line}.png`), result.masks[line]);
    const round = (t?: StageTimings) => t && Object.fromEntries(Object.entries(t).map(([k, v]) => [k, Math.round(v * 10) / 10]));
    const stats = {
      model: result.model,
      width: result.width,
      height: result.height,
      stats: result.stats,
      hand: result.hand,
      headLifeStart: result.headLifeStart,
      timings_ms: round(timings),
    };
    await writeFile(join(outDir, "stats.json"), `${JSON.stringify(stats, null, 2)}\n`);
    console.log(JSON.stringify(stats, null, 2));
    console.log(`wrote overlay.jpg, heart.png, head.png, life.png, stats.json to ${outDir}`);
    return 0;
  } catch (e) {
    if (isImageError(e)) {
      console.error(`${e.code}: ${e.message}`);
      return 1;
    }
    throw e;
  } finally {
    await analyzer.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith("/src/cli/analyze.ts")) {
  runAnalyzeCli(process.argv.slice(2)).then(
    (code) => (process.exitCode = code),
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : e);
      process.exitCode = 1;
    },
  );
}
