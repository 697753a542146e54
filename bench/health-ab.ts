/**
 * `npx tsx bench/health-ab.ts --a K=V[,K=V] --b K=V[,K=V] [--rounds N] [--seconds S] [--protocol gRPC|REST]`:
 * health latency under saturation for two server configurations side by side in one run. A
 * server is started from this checkout with each extra environment (both idle but for the one
 * being measured); in each round, in alternating order, each gets 4 analyses of the 12 MP
 * workload in flight for S seconds while a 50 Hz probe times GET /v1/palm/health. A drift of the
 * shared machine hits both configurations alike; the table gives each round's p99 and max.
 *
 * Example: the worker scheduling policy, `--a PALM_WORKER_SCHED=normal --b PALM_WORKER_SCHED=idle`.
 */
import { generateApiKey } from "../src/auth/api-key.js";
import { warmUp, saturatedHealth } from "./health-probe.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { median, quantile } from "./stats.js";
import { makeWorkloads } from "./workloads.js";
import { argValue as arg, envArg } from "./args.js";

const envA = envArg("--a");
const envB = envArg("--b");
const ROUNDS = Number(arg("--rounds") ?? 4);
const SECONDS = Number(arg("--seconds") ?? 15);
const PROTOCOL = (arg("--protocol") ?? "gRPC") as "gRPC" | "REST";
if (PROTOCOL !== "gRPC" && PROTOCOL !== "REST") throw new Error("--protocol: gRPC or REST");

const { workloads } = await makeWorkloads();
const w = workloads.find((x) => x.name === "12MP JPEG")!;
const key = generateApiKey();
const base = { PALM_DEV_KEY: key, PALM_MAX_QUEUE: "14", LOG_LEVEL: "warn", PALM_ANALYZE_TIMEOUT_MS: "120000" };

interface Side {
  name: "A" | "B";
  server: ServerProcess;
  rounds: { p99: number; max: number; probes: number; rps: number }[];
}

const sides: Side[] = [];
try {
  for (const [name, env] of [["A", envA], ["B", envB]] as const) {
    const server = await startServerProcess({ ...base, ...env });
    sides.push({ name, server, rounds: [] });
    await warmUp(server, key, w);
  }
  for (let r = 0; r < ROUNDS; r++) {
    for (const s of r % 2 === 0 ? sides : [...sides].reverse()) {
      const { probes, rps } = await saturatedHealth(s.server, key, w, PROTOCOL, SECONDS);
      s.rounds.push({ p99: quantile(probes, 0.99), max: Math.max(...probes), probes: probes.length, rps });
    }
    process.stderr.write(`round ${r + 1}/${ROUNDS}: p99 A ${sides[0].rounds[r].p99.toFixed(1)} ms, B ${sides[1].rounds[r].p99.toFixed(1)} ms\n`);
  }
} finally {
  for (const s of sides) await s.server.stop();
}

const f = (x: number) => x.toFixed(1);
console.log(`A: ${arg("--a") ?? "(defaults)"}; B: ${arg("--b") ?? "(defaults)"}; ${ROUNDS} rounds of ${SECONDS} s, 12 MP JPEG over ${PROTOCOL} at c=4\n`);
console.log("| side | health p99 per round, ms | median p99 | max per round, ms | probes per round | analyses/s, median |");
console.log("|---|---|---|---|---|---|");
for (const s of sides) {
  console.log(
    `| ${s.name} | ${s.rounds.map((x) => f(x.p99)).join(", ")} | ${f(median(s.rounds.map((x) => x.p99)))} | ${s.rounds.map((x) => f(x.max)).join(", ")} | ${s.rounds.map((x) => x.probes).join(", ")} | ${median(s.rounds.map((x) => x.rps)).toFixed(2)} |`,
  );
}
