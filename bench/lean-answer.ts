/**
 * Lean answers (issue 31): the same 12 MP photo asked for with each `images` option, side by side.
 *
 * - {@link leanRounds}: end to end over REST, the photo uploaded as the raw file (`image/jpeg`), one
 *   request at a time; time from sending the request to the last byte of the answer, the CPU time
 *   the server and its workers spent on it (what a shared machine's load does not inflate much),
 *   and the answer's size.
 * - {@link leanEngineRounds}: the engine's own stages in this process (no HTTP, JSON, base64 or
 *   hand-over), so that the end-to-end difference can be split into what the engine skips and what
 *   the serving path skips.
 *
 * Every round runs every variant once. The orders form a balanced Latin square (Williams): over
 * each 4 rounds every variant comes once in each position and right after each other variant
 * once, so that neither a machine whose speed drifts nor what one answer leaves behind for the
 * next (a large answer's garbage, say) favours a variant.
 */
import type { ServerProcess } from "../test/helpers/index.js";
import type { ImageOutput } from "../src/inference/analyzer-types.js";
import { analyzeImage, noStageTimings, type PipelineEngine, type StageTimings } from "../src/inference/pipeline.js";
import { median } from "./stats.js";
import type { Workload } from "./workloads.js";

/** The downscaled overlay of the table: a phone screen's longer side. */
export const LEAN_OVERLAY_SIDE = 1024;

/** LeanVariant is one way of asking: its name in tables, its REST query and the engine's images. */
export interface LeanVariant {
  name: string;
  query: string;
  images: ImageOutput;
}

/** LEAN_VARIANTS: the full answer first (every ratio is over it), then the lean ones. */
export const LEAN_VARIANTS: readonly LeanVariant[] = [
  { name: "all (default)", query: "", images: { overlay: true, masks: true, maxOverlaySide: 0 } },
  { name: "none", query: "?images=none", images: { overlay: false, masks: false, maxOverlaySide: 0 } },
  { name: "masks", query: "?images=masks", images: { overlay: false, masks: true, maxOverlaySide: 0 } },
  {
    name: `overlay, max_overlay_side=${LEAN_OVERLAY_SIDE}`,
    query: `?images=overlay&max_overlay_side=${LEAN_OVERLAY_SIDE}`,
    images: { overlay: true, masks: false, maxOverlaySide: LEAN_OVERLAY_SIDE },
  },
];

/** LeanSample is one request's end-to-end time, the server's CPU time for it and the answer's size. */
export interface LeanSample {
  ms: number;
  /** User + system CPU time of the server and its workers during the request (10 ms ticks). */
  cpuMs: number;
  bytes: number;
}

async function once(server: ServerProcess, key: string, w: Workload, query: string): Promise<LeanSample> {
  const cpu0 = server.cpuSeconds();
  const t0 = performance.now();
  const res = await fetch(`${server.url}/v1/palm/analyze${query}`, {
    method: "POST",
    headers: { "x-api-key": key, "content-type": `image/${w.format}` },
    body: new Uint8Array(w.bytes),
  });
  const body = new Uint8Array(await res.arrayBuffer());
  const ms = performance.now() - t0;
  const cpuMs = (server.cpuSeconds() - cpu0) * 1000;
  if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${new TextDecoder().decode(body).slice(0, 200)}`);
  return { ms, cpuMs, bytes: body.byteLength };
}

/** WILLIAMS: the order of each round, by round % 4 (a balanced Latin square of the four variants). */
const WILLIAMS = [
  [0, 1, 3, 2],
  [1, 2, 0, 3],
  [2, 3, 1, 0],
  [3, 0, 2, 1],
];

/** rotated runs `f` for every variant in round `round`'s order; results in LEAN_VARIANTS order. */
async function rotated<T>(round: number, f: (v: LeanVariant) => Promise<T>): Promise<T[]> {
  const out = new Array<T>(LEAN_VARIANTS.length);
  for (const i of WILLIAMS[round % WILLIAMS.length]) out[i] = await f(LEAN_VARIANTS[i]);
  return out;
}

/** leanRounds runs `rounds` rounds over REST (each variant once per round) after one untimed round; per round, per variant. */
export async function leanRounds(server: ServerProcess, key: string, w: Workload, rounds: number): Promise<LeanSample[][]> {
  await rotated(0, (v) => once(server, key, w, v.query));
  const out: LeanSample[][] = [];
  for (let r = 0; r < rounds; r++) out.push(await rotated(r, (v) => once(server, key, w, v.query)));
  return out;
}

/** EngineSample is one analyzeImage(): its stage timings and the CPU time this process spent on it (every thread). */
export type EngineSample = StageTimings & { cpuMs: number };

/** leanEngineRounds runs `rounds` rounds of analyzeImage() in this process (each variant once per round) after one untimed round. */
export async function leanEngineRounds(engine: PipelineEngine, w: Workload, rounds: number): Promise<EngineSample[][]> {
  const run = async (v: LeanVariant): Promise<EngineSample> => {
    const bytes = new Uint8Array(w.bytes);
    const cpu0 = process.cpuUsage();
    const { timings } = await analyzeImage(bytes, engine, { images: v.images });
    const cpu = process.cpuUsage(cpu0);
    return { ...timings, cpuMs: (cpu.user + cpu.system) / 1000 };
  };
  await rotated(0, run);
  const out: EngineSample[][] = [];
  for (let r = 0; r < rounds; r++) out.push(await rotated(r, run));
  return out;
}

const kb = (b: number) => (b / 1024).toFixed(b < 10 * 1024 ? 1 : 0);
const ms = (v: number) => (v >= 100 ? v.toFixed(0) : v.toFixed(1));

/** restTable is the side-by-side Markdown table of {@link leanRounds}: median time and server CPU, their ratios to the full answer, size. */
export function restTable(rounds: LeanSample[][]): string {
  const med = LEAN_VARIANTS.map((_, i) => ({
    ms: median(rounds.map((r) => r[i].ms)),
    cpuMs: median(rounds.map((r) => r[i].cpuMs)),
    bytes: median(rounds.map((r) => r[i].bytes)),
    ratios: rounds.map((r) => r[i].ms / r[0].ms),
  }));
  return [
    "| images | p50 end to end | / full | per round / full | server CPU p50 | / full | answer |",
    "|---|---|---|---|---|---|---|",
    ...LEAN_VARIANTS.map(
      (v, i) =>
        `| ${v.name} | ${ms(med[i].ms)} ms | ${(med[i].ms / med[0].ms).toFixed(2)}x | ${med[i].ratios.map((x) => x.toFixed(2)).join(" ")} | ` +
        `${ms(med[i].cpuMs)} ms | ${(med[i].cpuMs / med[0].cpuMs).toFixed(2)}x | ${kb(med[i].bytes)} KB |`,
    ),
  ].join("\n");
}

/** The table's columns: every stage the engine times (StageTimings, in its order), then the CPU. */
const STAGES: readonly (keyof EngineSample)[] = [...(Object.keys(noStageTimings()) as (keyof StageTimings)[]), "cpuMs"];

/** engineTable is the side-by-side Markdown table of {@link leanEngineRounds}: median milliseconds per stage, and CPU. */
export function engineTable(rounds: EngineSample[][]): string {
  return [
    `| images | ${STAGES.join(" | ")} |`,
    `|---|${STAGES.map(() => "---").join("|")}|`,
    ...LEAN_VARIANTS.map((v, i) => `| ${v.name} | ${STAGES.map((s) => ms(median(rounds.map((r) => r[i][s])))).join(" | ")} |`),
  ].join("\n");
}
