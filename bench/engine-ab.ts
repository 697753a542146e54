/**
 * The engine's own time per image (analyzeImage(), in this process, one onnxruntime thread per
 * session as a worker runs it) of this checkout against another checkout's, on the same photos,
 * in alternating rounds so that a machine whose speed drifts moves both sides alike: the
 * engine-ab scenario (`npm run bench -- --scenario engine-ab --a <other checkout>`).
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import sharp from "sharp";
import { analyzeImage, createPipelineEngine } from "../src/inference/pipeline.js";
import { median } from "./stats.js";

interface Side {
  name: string;
  run(bytes: Uint8Array): Promise<{ ms: number; lines: string }>;
  close(): Promise<void>;
}

const lines = (stats: Record<string, { detected: boolean }>) =>
  Object.entries(stats)
    .filter(([, s]) => s.detected)
    .map(([n]) => n)
    .join(",") || "-";

async function thisSide(): Promise<Side> {
  const engine = await createPipelineEngine({ intraOpNumThreads: 1 });
  return {
    name: `this (${engine.lines.metadata.model})`,
    async run(bytes) {
      const { result, timings } = await analyzeImage(bytes, engine);
      return { ms: timings.total, lines: lines(result.stats) };
    },
    close: () => engine.close(),
  };
}

/** otherSide loads the other checkout's pipeline: whatever its analyzeImage takes (a model session, or an engine). */
async function otherSide(dir: string): Promise<Side> {
  const url = (p: string) => pathToFileURL(join(dir, p)).href;
  const pipeline = await import(url("src/inference/pipeline.ts"));
  const modelPath = join(dir, "models/palm-lines/palm-lines.onnx");
  const handle = pipeline.createPipelineEngine
    ? await pipeline.createPipelineEngine({ intraOpNumThreads: 1, modelPath })
    : await (await import(url("src/inference/model-session.ts"))).createModelSession({ intraOpNumThreads: 1, modelPath });
  const metadata = handle.metadata ?? handle.lines.metadata;
  return {
    name: `a (${metadata.model})`,
    async run(bytes) {
      const { result, timings } = await pipeline.analyzeImage(bytes, handle);
      return { ms: timings.total, lines: lines(result.stats) };
    },
    close: () => (handle.close ? handle.close() : handle.release()),
  };
}

/** EngineAbRow is one workload's comparison. */
export interface EngineAbRow {
  workload: string;
  names: [string, string];
  /** Median ms of each side. */
  ms: [number, number];
  /** Median of the per-round ratios this / a. */
  ratio: number;
  lines: [string, string];
}

/**
 * engineAb times this checkout's analyzeImage() against the one in `dir`, `rounds` alternating
 * rounds after an untimed warm-up, on the README sample at 12 MP and 1 MP, a photo without a hand at
 * 1 MP and, when present, the real 12 MP photo IMG_0384.jpg of ../shared/real-palms.
 */
export async function engineAb(dir: string, rounds: number): Promise<EngineAbRow[]> {
  sharp.cache(false);
  const sample = readFileSync(new URL("../examples/sample-palm.jpg", import.meta.url));
  const workloads: { name: string; bytes: Uint8Array }[] = [
    { name: "sample x 12 MP", bytes: await sharp(sample).resize(3024, 4032, { kernel: "lanczos3" }).jpeg({ quality: 92 }).toBuffer() },
    { name: "sample x 1 MP", bytes: await sharp(sample).resize(864, 1152, { kernel: "lanczos3" }).jpeg({ quality: 92 }).toBuffer() },
  ];
  // A photo without a hand runs every palm search before it is answered no_hand: what the last search costs.
  const noHand = readFileSync(new URL("../test/fixtures/palms/negative-background.jpg", import.meta.url));
  workloads.push({
    name: "no hand x 1 MP",
    bytes: await sharp(noHand).resize(1152, 864, { fit: "fill" }).jpeg({ quality: 92 }).toBuffer(),
  });
  const real = resolve(new URL(".", import.meta.url).pathname, "../../shared/real-palms/IMG_0384.jpg");
  if (existsSync(real)) workloads.push({ name: "IMG_0384 (12 MP)", bytes: readFileSync(real) });
  const sides = [await thisSide(), await otherSide(resolve(dir))];
  const rows: EngineAbRow[] = [];
  try {
    for (const w of workloads) {
      for (const s of sides) await s.run(w.bytes); // warm-up, untimed
      const ms: number[][] = [[], []];
      const ratios: number[] = [];
      const found = ["", ""];
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? [0, 1] : [1, 0];
        const got: number[] = [];
        for (const i of order) {
          const { ms: t, lines: l } = await sides[i].run(w.bytes);
          got[i] = t;
          ms[i].push(t);
          found[i] = l;
        }
        ratios.push(got[0] / got[1]);
      }
      rows.push({
        workload: w.name,
        names: [sides[0].name, sides[1].name],
        ms: [median(ms[0]), median(ms[1])],
        ratio: median(ratios),
        lines: [found[0], found[1]],
      });
    }
  } finally {
    for (const s of sides) await s.close();
  }
  return rows;
}
