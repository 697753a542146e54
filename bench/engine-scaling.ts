/**
 * `npx tsx bench/engine-scaling.ts [--rounds N] [--workers N] [--hold C SECONDS]`: the c=2 / c=1 ratio of the engine
 * alone — the analyzer's worker pool in this process, fed the 12 MP workload by 1 and then 2
 * closed loops, with no HTTP, JSON, base64 or load generator — in paired rounds like table (b2)
 * of `npm run bench`. It tells whether the server's shortfall against the 1.7x target comes from
 * the engine itself or from what surrounds it (bench/RESULTS.md).
 */
import { createAnalyzer } from "../src/inference/analyzer.js";
import { engineScaling, pooledRatio } from "./engine-cells.js";
import { median } from "./stats.js";
import { makeWorkloads } from "./workloads.js";
import { argv, argValue } from "./args.js";

const ROUNDS = Number(argValue("--rounds") ?? 6);
const PER_LOOP = 6;

const { workloads } = await makeWorkloads();
const w = workloads.find((x) => x.name === "12MP JPEG")!;
const analyzer = await createAnalyzer({ workers: Number(argValue("--workers") ?? 2) });

const hold = argv.indexOf("--hold");
if (hold >= 0) {
  // --hold C SECONDS: keep C closed loops busy for SECONDS, for a profiler attached meanwhile
  // (bench/idle-attribution.py); print only how many analyses ran.
  const loops = Number(argv[hold + 1]);
  const until = performance.now() + 1000 * Number(argv[hold + 2]);
  let n = 0;
  await Promise.all(
    Array.from({ length: loops }, async () => {
      while (performance.now() < until) {
        await analyzer.analyze(new Uint8Array(w.bytes));
        n++;
      }
    }),
  );
  console.log(`${n} analyses by ${loops} loops`);
  await analyzer.close();
  process.exit(0);
}

const rows = await engineScaling(analyzer, w.bytes, ROUNDS, PER_LOOP);
await analyzer.close();

const f = (x: number, d = 2) => x.toFixed(d);
const med = (pick: (r: (typeof rows)[number]) => number) => median(rows.map(pick));
console.log(`| c=1 req/s, median | c=2 req/s, median | c=2 / c=1 per round | pooled | cores c=1 / c=2 | CPU ms per analysis c=1 / c=2 | machine idle + steal c=1 / c=2 (cores) |`);
console.log(`|---|---|---|---|---|---|---|`);
console.log(
  `| ${f(med((r) => r.c1.rps))} | ${f(med((r) => r.c2.rps))} | ` +
    `${rows.map((r) => f(r.c2.rps / r.c1.rps)).join(", ")} | ${f(pooledRatio(rows))}x | ` +
    `${f(med((r) => r.c1.cores))} / ${f(med((r) => r.c2.cores))} | ` +
    `${f(med((r) => r.c1.cpuMs), 0)} / ${f(med((r) => r.c2.cpuMs), 0)} | ` +
    `${f(med((r) => r.c1.idle))} + ${f(med((r) => r.c1.steal))} / ${f(med((r) => r.c2.idle))} + ${f(med((r) => r.c2.steal))} |`,
);
