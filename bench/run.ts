/**
 * `npm run bench [-- --quick] [-- --out FILE.md] [-- --json FILE.json]`: issue 4's benchmark in one run.
 *
 * (a) the floor: the engine's own per-image code in-process, stage by stage (bench/floor.ts);
 * (b) the full request over REST (autocannon) and over gRPC (a @grpc/grpc-js loop) at
 *     concurrency 1, 2, 4 and 16, against the server started as `npm start` does, as a child process:
 *     req/s, p50, p99, 200/503 counts and the server's peak RSS (/proc/<pid>/status);
 * (c) GET /v1/palm/health latency from a 50 Hz probe (in a thread of its own), idle and while 12 MP analyses saturate the CPUs;
 * plus c=16 against the default admission bound, to show the 503 overloaded refusals.
 *
 * Server configuration for (b) and (c): PALM_WORKERS unset (one worker per core), PALM_MAX_QUEUE=14,
 * so that all 16 concurrent requests are admitted (2 running + 14 queued on 2 cores) and c=16
 * measures memory under 16 concurrent 12 MP requests rather than refusals. The overload row uses
 * the default queue (2 x workers).
 */
import { execSync } from "node:child_process";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { PalmService } from "../gen/palm/v1/palm_pb.js";
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { generateApiKey } from "../src/auth/api-key.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import { analyzeImage, createPipelineEngine } from "../src/inference/pipeline.js";
import { callUnary, createGrpcJsClient } from "../test/helpers/grpc.js";
import { argv, argValue, envArg, hasFlag } from "./args.js";
import { analyzeLoad, probeHealth, saturatedHealth, warmUp } from "./health-probe.js";
import { engineScaling, pooledRatio, type EngineRound } from "./engine-cells.js";
import { measureFloor, type FloorResult } from "./floor.js";
import { machineCores, machineCpu, startCommand, startServerProcess, trackPeakRss, type ServerProcess } from "./server-process.js";
import { median, quantile } from "./stats.js";
import { makeWorkloads, type Workload } from "./workloads.js";

const QUICK = hasFlag("--quick");
const OUT = argValue("--out");
const JSON_OUT = argValue("--json");
/** --only NAME: run the workloads whose name starts with NAME (experiments). */
const ONLY = argValue("--only");
/** --env K=V[,K=V]: extra environment for the server (experiments, e.g. MALLOC_ARENA_MAX=2). */
const EXTRA_ENV = envArg("--env");

const CONCURRENCY = [1, 2, 4, 16] as const;
/** Requests per cell: enough for a stable p50 in bounded time (the whole run stays under ~6 min). */
function amountFor(w: Workload, c: number): number {
  const big = w.width * w.height > 4_000_000;
  const full = big ? { 1: 8, 2: 12, 4: 16, 16: 48 } : { 1: 12, 2: 16, 4: 24, 16: 48 };
  const quick = big ? { 1: 3, 2: 4, 4: 8, 16: 16 } : { 1: 4, 2: 6, 4: 8, 16: 16 };
  return (QUICK ? quick : full)[c as 1 | 2 | 4 | 16];
}
const FLOOR_ITERATIONS = QUICK ? 2 : 5;
const SATURATION_S = QUICK ? 4 : 20;
const IDLE_PROBE_S = QUICK ? 2 : 5;
const OVERLOAD_S = QUICK ? 4 : 8;
const QUEUE = 14;
/** Paired rounds of the scaling measurement (c=1 then c=2, or the other way round, back to back). */
const SCALING_ROUNDS = QUICK ? 2 : 6;
const SCALING_AMOUNT = { 1: QUICK ? 3 : 6, 2: QUICK ? 4 : 12 } as const;
/** Paired rounds of e2e over the floor (b1): one floor run, one REST and one gRPC request each. */
const PAIRED_ROUNDS = QUICK ? 3 : 10;

/** PairedFloor is (b1): per round, the floor and one request per protocol at c=1, ms. */
interface PairedFloor {
  workload: string;
  rounds: { floor: number; rest: number; grpc: number }[];
}

/**
 * Scaling is c=2 against c=1 measured in paired rounds on one workload: each round runs one cell
 * of each right after the other (alternating which goes first), so that slow drifts of a shared
 * machine hit both sides of a round's ratio alike.
 */
interface Scaling {
  workload: string;
  protocol: "REST" | "gRPC";
  /** Per round: [c=1 req/s, c=2 req/s]. */
  rounds: [number, number][];
  /** Sum of 200s over sum of wall time, per concurrency. */
  pooled: [number, number];
  /** CPU use over all rounds, in cores, per concurrency: the server's and this process's (the load generator). */
  serverCpu: [number, number];
  clientCpu: [number, number];
  /** Server CPU time per answered request over all rounds, in ms, per concurrency. */
  cpuPerRequest: [number, number];
  /** The whole machine's idle and steal CPU over all rounds, in cores, per concurrency. */
  idle: [number, number];
  steal: [number, number];
}

interface Health {
  idle: number[];
  loads: { name: string; probes: number[]; rps: number; peakRss: number }[];
}

interface Cell {
  workload: string;
  protocol: "REST" | "gRPC";
  c: number;
  n: number;
  ok: number;
  overloaded: number;
  other: number;
  /** Non-200 outcomes other than overloaded, by status/code and message (first few). */
  otherDetails?: string[];
  rps: number;
  p50: number;
  p99: number;
  peakRss: number;
  /** Server CPU use during the cell, in cores. */
  cpu: number;
  /** The whole machine's idle and steal CPU during the cell, in cores (see machineCpu). */
  machine: { idle: number; steal: number };
}

const log = (...a: unknown[]) => process.stderr.write(a.join(" ") + "\n");
const mb = (bytes: number) => (bytes / 1e6).toFixed(0);
const ms = (v: number) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : "–");
const x = (v: number) => (Number.isFinite(v) ? `${v.toFixed(2)}x` : "–");

// ---------------------------------------------------------------------------------------------

function machine(): Record<string, string> {
  const cpuinfo = readFileSync("/proc/cpuinfo", "utf8");
  const model = /^model name\s*:\s*(.+)$/m.exec(cpuinfo)?.[1] ?? os.cpus()[0]?.model ?? "unknown";
  const memKb = Number(/^MemTotal:\s+(\d+)/m.exec(readFileSync("/proc/meminfo", "utf8"))?.[1] ?? 0);
  return {
    nproc: String(os.availableParallelism()),
    cpu: model,
    memory: `${(memKb / 1024 / 1024).toFixed(1)} GiB`,
    node: process.version,
    kernel: `${os.type()} ${os.release()}`,
    "load average at start": os.loadavg().map((l) => l.toFixed(2)).join(" "),
    "other CPU users at start (training)": otherCpuUsers(),
  };
}

/** otherCpuUsers lists the model-training processes running now (they share the CPUs). */
function otherCpuUsers(): string {
  let others = "none seen";
  try {
    others = execSync("pgrep -af 'training\\.' || true", { encoding: "utf8" })
      .split("\n")
      .filter((l) => l.trim() && !l.includes("pgrep"))
      .map((l) => l.split(" ").slice(1, 4).join(" "))
      .join("; ") || "none seen";
  } catch {
    // pgrep missing: leave "none seen"
  }
  return others;
}

// ---------------------------------------------------------------------------------------------

async function restCell(server: ServerProcess, key: string, w: Workload, c: number, amount: number): Promise<Cell> {
  const t0 = performance.now();
  const cpu0 = server.cpuSeconds();
  const machine0 = machineCpu();
  let last = t0;
  let lastCpu = cpu0;
  let lastMachine = machine0;
  const { value: r, peakRss } = await trackPeakRss(server, () =>
    analyzeLoad(server, key, w, { connections: c, amount }).on("response", () => {
      last = performance.now();
      lastCpu = server.cpuSeconds();
      lastMachine = machineCpu();
    }),
  );
  const overloaded = r.statusCodeStats?.["503"]?.count ?? 0;
  const otherDetails = Object.entries(r.statusCodeStats ?? {})
    .filter(([code]) => code !== "200" && code !== "503")
    .map(([code, v]) => `${v.count} x HTTP ${code}`);
  if (r.errors + r.timeouts > 0) otherDetails.push(`${r.errors} errors, ${r.timeouts} timeouts`);
  // autocannon resolves on its one-second ticker (and its own duration is whole seconds): time the
  // cell by its last response instead.
  const wall = (last - t0) / 1000;
  return {
    workload: w.name,
    protocol: "REST",
    c,
    n: r["2xx"] + r.non2xx + r.errors,
    ok: r["2xx"],
    overloaded,
    other: r.non2xx - overloaded + r.errors + r.timeouts,
    otherDetails,
    rps: r["2xx"] / wall,
    p50: r.latency.p50,
    p99: r.latency.p99,
    peakRss,
    cpu: (lastCpu - cpu0) / wall,
    machine: machineCores(machine0, lastMachine, wall),
  };
}

type GrpcClient = ReturnType<typeof createGrpcJsClient>;

async function grpcCell(server: ServerProcess, client: GrpcClient, key: string, w: Workload, c: number, amount: number): Promise<Cell> {
  const latencies: number[] = [];
  let ok = 0;
  let overloaded = 0;
  let other = 0;
  const otherDetails = new Map<string, number>();
  let started = 0;
  const t0 = performance.now();
  const machine0 = machineCpu();
  const { peakRss, cpuCores } = await trackPeakRss(server, () =>
    Promise.all(
      Array.from({ length: c }, async () => {
        while (started < amount) {
          started++;
          const t = performance.now();
          const r = await callUnary(client, PalmService.method.analyze, { image: w.bytes }, { "x-api-key": key });
          latencies.push(performance.now() - t);
          const reason = r.connectError?.findDetails(ErrorInfoSchema)[0]?.reason;
          if (!r.error) ok++;
          else if (reason === "overloaded") overloaded++;
          else {
            other++;
            const k = `${r.error.code} ${reason ?? ""} ${r.error.details}`;
            otherDetails.set(k, (otherDetails.get(k) ?? 0) + 1);
          }
        }
      }),
    ),
  );
  const wall = (performance.now() - t0) / 1000;
  return {
    workload: w.name,
    protocol: "gRPC",
    c,
    n: latencies.length,
    ok,
    overloaded,
    other,
    otherDetails: [...otherDetails].map(([k, n]) => `${n} x ${k}`),
    rps: ok / wall,
    p50: median(latencies),
    p99: quantile(latencies, 0.99),
    peakRss,
    cpu: cpuCores,
    machine: machineCores(machine0, machineCpu(), wall),
  };
}

const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

// ---------------------------------------------------------------------------------------------

async function main(): Promise<void> {
  const began = performance.now();
  const host = machine();
  log(`bench: ${QUICK ? "quick" : "full"} run on ${host.nproc} x ${host.cpu}`);
  const made = await makeWorkloads();
  const dir = made.dir;
  const workloads = made.workloads.filter((w) => ONLY === undefined || w.name.startsWith(ONLY));
  try {
    for (const w of workloads) log(`workload ${w.name}: ${w.width}x${w.height} ${w.format}, ${(w.bytes.byteLength / 1e6).toFixed(2)} MB`);

    // (a) the floor, before the server starts: nothing else of ours competes for the CPUs.
    log("floor: in-process stages ...");
    const floor = await measureFloor(workloads, { iterations: FLOOR_ITERATIONS });

    // (b) the full request.
    const key = generateApiKey();
    const env = { PALM_DEV_KEY: key, PALM_MAX_QUEUE: String(QUEUE), LOG_LEVEL: "info", PALM_ANALYZE_TIMEOUT_MS: "120000", ...EXTRA_ENV };
    const server = await startServerProcess(env);
    const idleRss = server.memory().rss;
    const cells: Cell[] = [];
    let health: Health;
    const scaling: Scaling[] = [];
    let paired: PairedFloor = { workload: "", rounds: [] };
    let exitCode: number | null;
    try {
      for (const w of workloads) {
        for (const protocol of ["REST", "gRPC"] as const) {
          // A fresh gRPC connection per workload (an HTTP/2 session idle for the whole REST part
          // would meet the server's idle timeout). Warm-up, untimed: the first requests of a size
          // grow the allocators and the connection's flow-control windows.
          const grpc = protocol === "gRPC" ? createGrpcJsClient(server.port) : undefined;
          try {
            if (grpc) await grpcCell(server, grpc, key, w, 2, 2);
            else await restCell(server, key, w, 2, 2);
            for (const c of CONCURRENCY) {
              const amount = amountFor(w, c);
              const cell = grpc ? await grpcCell(server, grpc, key, w, c, amount) : await restCell(server, key, w, c, amount);
              cells.push(cell);
              log(
                `${w.name} ${protocol} c=${c}: n=${cell.n} 200=${cell.ok} 503=${cell.overloaded} other=${cell.other} ` +
                  `${cell.rps.toFixed(2)} req/s p50=${ms(cell.p50)} p99=${ms(cell.p99)} ms peak RSS ${mb(cell.peakRss)} MB CPU ${cell.cpu.toFixed(2)}` +
                  (cell.otherDetails?.length ? ` (${cell.otherDetails.join("; ")})` : ""),
              );
            }
          } finally {
            grpc?.close();
          }
        }
      }

      // (b1) e2e over the floor in paired rounds on the 12 MP workload: the floor (in this
      // process, the server idle) and one request per protocol at c=1 (this process idle but for
      // the client), back to back in a rotating order, so that a machine whose speed drifts
      // within minutes moves both sides of each ratio alike.
      {
        const w = workloads[0];
        paired = { workload: w.name, rounds: [] };
        const engine = await createPipelineEngine({ intraOpNumThreads: 1 });
        const grpc = createGrpcJsClient(server.port);
        try {
          await analyzeImage(w.bytes, engine); // warm-up, untimed
          await grpcCell(server, grpc, key, w, 1, 1);
          const steps = {
            floor: async () => (await analyzeImage(w.bytes, engine)).timings.total,
            rest: async () => (await restCell(server, key, w, 1, 1)).p50,
            grpc: async () => (await grpcCell(server, grpc, key, w, 1, 1)).p50,
          };
          const names = ["floor", "rest", "grpc"] as const;
          for (let round = 0; round < PAIRED_ROUNDS; round++) {
            const got = { floor: 0, rest: 0, grpc: 0 };
            for (let i = 0; i < names.length; i++) {
              const name = names[(i + round) % names.length];
              got[name] = await steps[name]();
            }
            paired.rounds.push(got);
            log(`e2e/floor ${w.name} round ${round + 1}: floor ${ms(got.floor)} REST ${ms(got.rest)} gRPC ${ms(got.grpc)} ms`);
          }
        } finally {
          grpc.close();
          await engine.close();
        }
      }

      // (b2) scaling, c=2 over c=1, in paired rounds on the 12 MP workload.
      for (const protocol of ["REST", "gRPC"] as const) {
        const w = workloads[0];
        const grpc = protocol === "gRPC" ? createGrpcJsClient(server.port) : undefined;
        const cellOf = (c: 1 | 2) =>
          grpc ? grpcCell(server, grpc, key, w, c, SCALING_AMOUNT[c]) : restCell(server, key, w, c, SCALING_AMOUNT[c]);
        try {
          await cellOf(2); // warm-up, untimed
          const s: Scaling = {
            workload: w.name, protocol, rounds: [], pooled: [0, 0], serverCpu: [0, 0], clientCpu: [0, 0], cpuPerRequest: [0, 0],
            idle: [0, 0], steal: [0, 0],
          };
          const zero = () => ({ ok: 0, wall: 0, server: 0, client: 0, idle: 0, steal: 0 });
          const sums = { 1: zero(), 2: zero() };
          for (let round = 0; round < SCALING_ROUNDS; round++) {
            const order: (1 | 2)[] = round % 2 === 0 ? [1, 2] : [2, 1];
            const rps = { 1: 0, 2: 0 };
            for (const c of order) {
              const client0 = process.cpuUsage();
              const cell = await cellOf(c);
              const client = process.cpuUsage(client0);
              // A cell's wall time ends at its last answer (autocannon resolves up to 1 s later, idle).
              const wall = cell.ok / cell.rps;
              rps[c] = cell.rps;
              sums[c].ok += cell.ok;
              sums[c].wall += wall;
              sums[c].server += cell.cpu * wall;
              sums[c].client += (client.user + client.system) / 1e6;
              sums[c].idle += cell.machine.idle * wall;
              sums[c].steal += cell.machine.steal * wall;
            }
            s.rounds.push([rps[1], rps[2]]);
            log(`scaling ${w.name} ${protocol} round ${round + 1}: c=1 ${rps[1].toFixed(2)} c=2 ${rps[2].toFixed(2)} req/s, ${(rps[2] / rps[1]).toFixed(2)}x`);
          }
          s.pooled = [sums[1].ok / sums[1].wall, sums[2].ok / sums[2].wall];
          s.serverCpu = [sums[1].server / sums[1].wall, sums[2].server / sums[2].wall];
          s.clientCpu = [sums[1].client / sums[1].wall, sums[2].client / sums[2].wall];
          s.cpuPerRequest = [(1000 * sums[1].server) / sums[1].ok, (1000 * sums[2].server) / sums[2].ok];
          s.idle = [sums[1].idle / sums[1].wall, sums[2].idle / sums[2].wall];
          s.steal = [sums[1].steal / sums[1].wall, sums[2].steal / sums[2].wall];
          scaling.push(s);
        } finally {
          grpc?.close();
        }
      }

      // (c) health: idle, then while 12 MP analyses keep both cores busy (c=4: 2 running, 2 queued),
      // once over REST (JSON + base64 in the codec threads) and once over gRPC (binary, on the event loop).
      log("health probe: idle ...");
      await sleep(1);
      const idle = await probeHealth(server.url, sleep(IDLE_PROBE_S));
      const big = workloads[0];
      log(`health probe: under ${big.name} REST load ...`);
      const rest = await saturatedHealth(server, key, big, "REST", SATURATION_S);
      log(`health probe: under ${big.name} gRPC load ...`);
      const grpc = await saturatedHealth(server, key, big, "gRPC", SATURATION_S);
      health = {
        idle,
        loads: [
          { name: `${big.name} REST analyses at c=4`, ...rest },
          { name: `${big.name} gRPC analyses at c=4`, ...grpc },
        ],
      };
    } finally {
      exitCode = await server.stop();
    }

    // The same saturation against servers without one of the measures that keep the event loop
    // free, side by side: JSON and base64 on the event loop (as before the codec workers), the
    // workers only niced rather than SCHED_IDLE (under both protocols: SCHED_IDLE was made for
    // the gRPC case, where the event loop itself decodes and encodes the messages), and the
    // engine's threads at the event loop's priority.
    const variants: { env: Record<string, string>; what: string; protocol: "REST" | "gRPC" }[] = [
      { env: { PALM_REST_CODEC_THREADS: "0" }, protocol: "REST", what: "JSON/base64 on the event loop (PALM_REST_CODEC_THREADS=0)" },
      { env: { PALM_WORKER_SCHED: "normal" }, protocol: "REST", what: "workers at nice 10 but not SCHED_IDLE (PALM_WORKER_SCHED=normal)" },
      { env: { PALM_WORKER_SCHED: "normal" }, protocol: "gRPC", what: "workers at nice 10 but not SCHED_IDLE (PALM_WORKER_SCHED=normal)" },
      { env: { PALM_THREAD_NICE: "0", PALM_WORKER_SCHED: "normal" }, protocol: "REST", what: "engine threads not deprioritised (PALM_THREAD_NICE=0, PALM_WORKER_SCHED=normal)" },
    ];
    for (const v of variants) {
      const other = await startServerProcess({ ...env, ...v.env });
      try {
        const big = workloads[0];
        log(`health probe: under ${big.name} ${v.protocol} load, ${v.what} ...`);
        await warmUp(other, key, big);
        const loaded = await saturatedHealth(other, key, big, v.protocol, SATURATION_S);
        health.loads.push({ name: `${big.name} ${v.protocol} analyses at c=4, ${v.what}`, ...loaded });
      } finally {
        await other.stop();
      }
    }

    // Overload: the default admission bound (2 x workers queued) at c=16.
    log("overload: c=16 against the default queue ...");
    let overload: Cell;
    const dflt = await startServerProcess({ PALM_DEV_KEY: key, LOG_LEVEL: "info", ...EXTRA_ENV });
    try {
      const big = workloads[0];
      await restCell(dflt, key, big, 2, 2);
      const [m0, t0] = [machineCpu(), performance.now()];
      const { value: r, peakRss, cpuCores } = await trackPeakRss(dflt, () =>
        analyzeLoad(dflt, key, big, { connections: 16, duration: OVERLOAD_S }),
      );
      const [m1, wall] = [machineCpu(), (performance.now() - t0) / 1000];
      const s503 = r.statusCodeStats?.["503"]?.count ?? 0;
      overload = {
        workload: big.name,
        protocol: "REST",
        c: 16,
        n: r["2xx"] + r.non2xx + r.errors,
        ok: r["2xx"],
        overloaded: s503,
        other: r.non2xx - s503 + r.errors + r.timeouts,
        rps: r["2xx"] / r.duration,
        p50: r.latency.p50,
        p99: r.latency.p99,
        peakRss,
        cpu: cpuCores,
        machine: machineCores(m0, m1, wall),
      };
    } finally {
      await dflt.stop();
    }

    // (b2)'s reference: the engine alone, its worker pool in this process with the server's
    // default worker count, the same paired rounds on the largest workload, no server or client.
    // Last, once the servers have stopped, so that nothing of it can touch their measurements.
    const largest = workloads.reduce((a, b) => (a.width * a.height >= b.width * b.height ? a : b));
    log(`engine alone: ${SCALING_ROUNDS} paired rounds on ${largest.name} ...`);
    const engineAnalyzer = await createAnalyzer();
    let engine: { workload: string; rounds: EngineRound[] };
    try {
      engine = { workload: largest.name, rounds: await engineScaling(engineAnalyzer, largest.bytes, SCALING_ROUNDS, SCALING_AMOUNT[1]) };
    } finally {
      await engineAnalyzer.close();
    }
    const elapsed = (performance.now() - began) / 1000;
    const md = report({ host, workloads, floor, paired, engine, cells, scaling, health, overload, idleRss, exitCode, elapsed });
    process.stdout.write(md);
    if (OUT) writeFileSync(OUT, md);
    if (JSON_OUT) writeFileSync(JSON_OUT, JSON.stringify({ host, floor, paired, engine, cells, scaling, health, overload, idleRss, elapsed }, null, 2));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------

function report(r: {
  host: Record<string, string>;
  workloads: Workload[];
  floor: FloorResult[];
  paired: PairedFloor;
  engine: { workload: string; rounds: EngineRound[] };
  cells: Cell[];
  scaling: Scaling[];
  health: Health;
  overload: Cell;
  idleRss: number;
  exitCode: number | null;
  elapsed: number;
}): string {
  const lines: string[] = [];
  const out = (s = "") => lines.push(s);
  out(`## Benchmark run (${QUICK ? "quick" : "full"}), ${new Date().toISOString()}`);
  out();
  out("| machine | |");
  out("|---|---|");
  for (const [k, v] of Object.entries(r.host)) out(`| ${k} | ${v} |`);
  out();
  out(`Load average at the end: ${os.loadavg().map((l) => l.toFixed(2)).join(" ")}; other CPU users at the end: ${otherCpuUsers()}.`);
  out();
  out(`Command: \`npm run bench${argv.length ? ` -- ${argv.join(" ")}` : ""}\` — total ${r.elapsed.toFixed(0)} s. Server: \`node ${startCommand().join(" ")}\`, ` +
    `in-memory store, PALM_WORKERS unset (${r.host.nproc} workers), PALM_MAX_QUEUE=${QUEUE}, LOG_LEVEL=info (stdout discarded); ` +
    `idle RSS after start ${mb(r.idleRss)} MB; exit code after SIGTERM ${r.exitCode}.`);
  out();
  out("### Workloads");
  out();
  out("| workload | size | file |");
  out("|---|---|---|");
  for (const w of r.workloads) out(`| ${w.name} | ${w.width}x${w.height} | ${w.format.toUpperCase()}, ${(w.bytes.byteLength / 1e6).toFixed(2)} MB |`);
  out();
  out(`### (a) Floor: the engine's code in-process, median of ${r.floor[0]?.iterations} runs (ms)`);
  out();
  out("| workload | sharp decode | resize to model input | ONNX 1 pass | ONNX engine (passes) | postprocess | 3 mask PNGs | overlay JPEG | **floor = analyzeImage()** | CPU cores used | lines detected |");
  out("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const f of r.floor) {
    out(
      `| ${f.workload} | ${ms(f.decode)} | ${ms(f.resize)} | ${ms(f.inferOnePass)} | ${ms(f.inferEngine)} (${f.passes}) | ${ms(f.postprocess)} | ` +
        `${ms(f.maskEncode)} | ${ms(f.overlayEncode)} | **${ms(f.total)}** | ${f.cores.toFixed(2)} | ${f.detected.join(", ") || "none"} |`,
    );
  }
  out();
  out("### (b) Full request, server as a child process");
  out();
  out("| workload | protocol | c | requests | 200 | 503 | other | req/s (200s) | p50 ms | p99 ms | peak RSS MB | server CPU (cores) |");
  out("|---|---|---|---|---|---|---|---|---|---|---|---|");
  for (const c of [...r.cells, { ...r.overload, protocol: "REST (default queue)" as Cell["protocol"] }]) {
    out(
      `| ${c.workload} | ${c.protocol} | ${c.c} | ${c.n} | ${c.ok} | ${c.overloaded} | ${c.other} | ${c.rps.toFixed(2)} | ${ms(c.p50)} | ${ms(c.p99)} | ${mb(c.peakRss)} | ${c.cpu.toFixed(2)} |`,
    );
  }
  out();
  const others = [...r.cells, r.overload].filter((c) => c.otherDetails?.length);
  for (const c of others) out(`- other outcomes, ${c.workload} ${c.protocol} c=${c.c}: ${c.otherDetails!.join("; ")}`);
  if (others.length) out();
  out(
    `The last row runs c=16 for ${OVERLOAD_S} s against the default admission bound (${r.host.nproc} running + ${2 * Number(r.host.nproc)} queued): ` +
      "the excess is refused at once with 503 overloaded, so its latency percentiles mix fast refusals with full analyses.",
  );
  out();
  const pr = r.paired.rounds;
  if (pr.length) {
    out(`### (b1) End-to-end over the floor on the ${r.paired.workload}, c=1, in ${pr.length} paired rounds (ms)`);
    out();
    out(
      "Each round runs the floor (analyzeImage() in the bench process, the server idle), one REST request and one gRPC request " +
        "(the bench process idle but for the client), back to back in a rotating order, so that a machine whose speed drifts " +
        "within minutes moves both sides of each ratio alike; table (a) and the c=1 cells of (b) are measured minutes apart.",
    );
    out();
    out("| | per round | median |");
    out("|---|---|---|");
    const row = (name: string, pick: (q: (typeof pr)[number]) => number) =>
      out(`| ${name} | ${pr.map((q) => ms(pick(q))).join(", ")} | ${ms(median(pr.map(pick)))} |`);
    row("floor", (q) => q.floor);
    row("REST request", (q) => q.rest);
    row("gRPC request", (q) => q.grpc);
    out(`| REST / floor | ${pr.map((q) => (q.rest / q.floor).toFixed(2)).join(", ")} | ${x(median(pr.map((q) => q.rest / q.floor)))} |`);
    out(`| gRPC / floor | ${pr.map((q) => (q.grpc / q.floor).toFixed(2)).join(", ")} | ${x(median(pr.map((q) => q.grpc / q.floor)))} |`);
    out();
  }
  out(`### (b2) Scaling on the ${r.scaling[0]?.workload}: c=2 over c=1 in ${SCALING_ROUNDS} paired rounds`);
  out();
  out(
    `Each round runs ${SCALING_AMOUNT[1]} requests at c=1 and ${SCALING_AMOUNT[2]} at c=2 back to back (alternating which comes first), ` +
      "on the same server and connection setup as (b), so that a slow drift of the shared machine hits both halves of a round alike.",
  );
  out();
  out("| protocol | c=1 req/s, median | c=2 req/s, median | c=2 / c=1 per round | median of rounds | pooled (all rounds) | CPU cores at c=1, server + load generator | CPU cores at c=2, server + load generator | server CPU ms per request, c=1 / c=2 | machine idle + steal at c=1 (cores) | machine idle + steal at c=2 (cores) |");
  out("|---|---|---|---|---|---|---|---|---|---|---|");
  for (const s of r.scaling) {
    const ratios = s.rounds.map(([a, b]) => b / a);
    out(
      `| ${s.protocol} | ${median(s.rounds.map((q) => q[0])).toFixed(2)} | ${median(s.rounds.map((q) => q[1])).toFixed(2)} | ` +
        `${ratios.map((v) => v.toFixed(2)).join(", ")} | ${x(median(ratios))} | ${x(s.pooled[1] / s.pooled[0])} | ` +
        `${s.serverCpu[0].toFixed(2)} + ${s.clientCpu[0].toFixed(2)} | ${s.serverCpu[1].toFixed(2)} + ${s.clientCpu[1].toFixed(2)} | ` +
        `${s.cpuPerRequest[0].toFixed(0)} / ${s.cpuPerRequest[1].toFixed(0)} | ` +
        `${s.idle[0].toFixed(2)} + ${s.steal[0].toFixed(2)} | ${s.idle[1].toFixed(2)} + ${s.steal[1].toFixed(2)} |`,
    );
  }
  const e = r.engine.rounds;
  if (e.length) {
    const em = (pick: (q: EngineRound) => number) => median(e.map(pick));
    const eRatios = e.map((q) => q.c2.rps / q.c1.rps);
    out(
      `| engine alone (${r.engine.workload}, in-process, no server or client) | ${em((q) => q.c1.rps).toFixed(2)} | ${em((q) => q.c2.rps).toFixed(2)} | ` +
        `${eRatios.map((v) => v.toFixed(2)).join(", ")} | ${x(median(eRatios))} | ${x(pooledRatio(e))} | ` +
        `${em((q) => q.c1.cores).toFixed(2)} + 0 | ${em((q) => q.c2.cores).toFixed(2)} + 0 | ` +
        `${em((q) => q.c1.cpuMs).toFixed(0)} / ${em((q) => q.c2.cpuMs).toFixed(0)} | ` +
        `${em((q) => q.c1.idle).toFixed(2)} + ${em((q) => q.c1.steal).toFixed(2)} | ${em((q) => q.c2.idle).toFixed(2)} + ${em((q) => q.c2.steal).toFixed(2)} |`,
    );
  }
  out();
  out(
    "How to read it: the pooled ratio is (server cores at c=2 / at c=1) x (server CPU per request at c=1 / at c=2). " +
      "The engine-alone row, measured after the servers stopped, runs the analyzer's worker pool in the bench process " +
      "(its cores and CPU per analysis are that process's, medians of the rounds): what the engine itself allows on this machine. " +
      `The machine has ${r.host.nproc} cores; what the server does not get at c=2 is the load generator's share, the machine's ` +
      "idle time (/proc/stat idle + iowait) and steal (time the hypervisor gave to other guests).",
  );
  out();
  const hi = r.health.idle;
  out("### (c) GET /v1/palm/health, 50 Hz probe, one request at a time (ms)");
  out();
  out("| condition | probes | p50 | p99 | max |");
  out("|---|---|---|---|---|");
  out(`| idle | ${hi.length} | ${ms(median(hi))} | ${ms(quantile(hi, 0.99))} | ${ms(Math.max(...hi))} |`);
  for (const l of r.health.loads) {
    out(
      `| ${l.name} (${l.rps.toFixed(2)} req/s, peak RSS ${mb(l.peakRss)} MB) | ${l.probes.length} | ` +
        `${ms(median(l.probes))} | ${ms(quantile(l.probes, 0.99))} | ${ms(Math.max(...l.probes))} |`,
    );
  }
  out();

  // Ratios and targets.
  const cell = (w: string, p: string, c: number) => r.cells.find((k) => k.workload === w && k.protocol === p && k.c === c);
  out("### Ratios and targets");
  out();
  out("| ratio | workload | REST | gRPC | target |");
  out("|---|---|---|---|---|");
  for (const f of r.floor) {
    const rest = cell(f.workload, "REST", 1)!;
    const grpc = cell(f.workload, "gRPC", 1)!;
    const target = f.workload.startsWith("12MP") ? "≤ 1.25x" : "(none)";
    out(`| e2e p50 at c=1 / floor | ${f.workload} | ${x(rest.p50 / f.total)} | ${x(grpc.p50 / f.total)} | ${target} |`);
  }
  if (pr.length) {
    const pm = (pick: (q: (typeof pr)[number]) => number) => median(pr.map(pick));
    out(
      `| e2e p50 at c=1 / floor, ${pr.length} paired rounds (b1) | ${r.paired.workload} | ${x(pm((q) => q.rest) / pm((q) => q.floor))} | ` +
        `${x(pm((q) => q.grpc) / pm((q) => q.floor))} | ≤ 1.25x |`,
    );
  }
  for (const f of r.floor) {
    const t = (p: string) => cell(f.workload, p, 2)!.rps / cell(f.workload, p, 1)!.rps;
    out(`| req/s c=2 / c=1 (table b) | ${f.workload} | ${x(t("REST"))} | ${x(t("gRPC"))} | ≥ 1.7x |`);
  }
  if (r.scaling.length) {
    const pooled = (p: string) => {
      const q = r.scaling.find((k) => k.protocol === p);
      return q ? q.pooled[1] / q.pooled[0] : Number.NaN;
    };
    out(`| req/s c=2 / c=1, ${SCALING_ROUNDS} paired rounds pooled (b2) | ${r.scaling[0].workload} | ${x(pooled("REST"))} | ${x(pooled("gRPC"))} | ≥ 1.7x |`);
  }
  if (r.engine.rounds.length) {
    out(`| the same, engine alone (b2), for reference | ${r.engine.workload} | ${x(pooledRatio(r.engine.rounds))} (no protocol) | - | (none) |`);
  }
  for (const f of r.floor) {
    const t = (p: string) => cell(f.workload, p, 4)!.rps / cell(f.workload, p, 1)!.rps;
    out(`| req/s c=4 / c=1 | ${f.workload} | ${x(t("REST"))} | ${x(t("gRPC"))} | (none) |`);
  }
  const big = r.floor[0]?.workload;
  const b16 = (p: string) => cell(big, p, 16)!.peakRss;
  out(`| peak RSS, 16 concurrent | ${big} | ${mb(b16("REST"))} MB | ${mb(b16("gRPC"))} MB | ≤ 1500 MB |`);
  const [hr, hg] = r.health.loads.map((l) => quantile(l.probes, 0.99));
  out(`| health p99 under saturation | 12MP load | ${ms(hr)} ms | ${ms(hg)} ms | ≤ 20 ms |`);
  out(`| health p99 loaded / idle | 12MP load | ${x(hr / quantile(hi, 0.99))} | ${x(hg / quantile(hi, 0.99))} | (reported) |`);
  out();
  return lines.join("\n") + "\n";
}

main().catch((e) => {
  process.stderr.write(`bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
