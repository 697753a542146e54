/**
 * Every benchmark scenario, declared in one table: workload x protocol x concurrency x server
 * configuration, the target it is held to (if any), how it is measured, and the code that
 * measures it. `npm run bench` runs the default ones (every target, and the rows read next to
 * them); `--scenario a,b` runs others; `--list` prints this table.
 */
import { describeSide, abHealth, abThroughput, medianP99, pooledRps, type SideSpec } from "./ab.js";
import { pairedFloor, scaling, withCells, restCell, type Protocol } from "./cells.js";
import { engineScaling, pooledRatio } from "./engine-cells.js";
import { engineAb } from "./engine-ab.js";
import { measureFloor } from "./floor.js";
import { probeHealth, saturatedHealth } from "./health-probe.js";
import { keylessCost, keylessFlood } from "./keyless.js";
import { LEAN_OVERLAY_SIDE, LEAN_VARIANTS, engineTable, leanEngineRounds, leanRounds, restTable } from "./lean-answer.js";
import {
  abuseVictim,
  LAYOUTS,
  type Layout,
  type PhaseResult,
  rateAcrossReplicas,
  REFUSAL_KINDS,
  type RefusalSide,
  refusalCost,
} from "./abuse.js";
import { PHASES } from "./abuse-clients.js";
import { jpegScanCosts } from "./jpeg-scans.js";
import { median, quantile } from "./stats.js";
import { uploadWindows } from "./upload-window.js";
import type { Workload } from "./workloads.js";
import type { ServerProcess } from "../test/helpers/index.js";
import type { PipelineEngine } from "../src/inference/pipeline.js";

/** A server configuration: the environment `npm start` gets on top of the bench's own (dev key, log level). */
export interface ServerConfig {
  name: string;
  env: Record<string, string>;
  what: string;
}

export const SERVERS = {
  bench: {
    name: "bench",
    env: { PALM_MAX_QUEUE: "14", PALM_ANALYZE_TIMEOUT_MS: "120000" },
    what: "`npm start`, in-memory store, one worker per core, PALM_MAX_QUEUE=14 (2 running + 14 queued: all 16 concurrent requests are admitted)",
  },
  default: { name: "default", env: {}, what: "`npm start`, in-memory store, every setting at its default (2 x workers queued)" },
} satisfies Record<string, ServerConfig>;

/** Target is a bound a scenario's measured value is held to. */
export interface Target {
  op: "≤" | "≥" | "<";
  value: number;
  unit: "x" | "ms" | "MB" | "%";
  /** Where the bound comes from. */
  from: string;
}

export const showTarget = (t: Target | undefined) => (t ? `${t.op} ${t.value}${t.unit === "x" ? "x" : ` ${t.unit}`}` : "(reported)");
export const meets = (t: Target, v: number) => (t.op === "≤" ? v <= t.value : t.op === "≥" ? v >= t.value : v < t.value);

/** Measured is a scenario's result: the value held to its target, shown as `text`, and what else it saw. */
export interface Measured {
  value: number;
  text: string;
  detail: string;
}

/** Ctx is what scenarios get from the runner (bench/run.ts). */
export interface Ctx {
  quick: boolean;
  /** The API key every bench server accepts (PALM_DEV_KEY). */
  key: string;
  log(line: string): void;
  workload(name: WorkloadName): Workload;
  /** The shared server of this configuration, started on first use (stopping the one of another configuration). */
  server(config: ServerConfig): Promise<ServerProcess>;
  /** Stops the shared server (scenarios that start their own, or measure the engine in this process). */
  stopServer(): Promise<void>;
  /** A pipeline engine in this process, with a worker's settings (the floor). */
  engine(): Promise<PipelineEngine>;
  /** The whole environment a server of this configuration gets: dev key, log level, the configuration's, --env. */
  envOf(config: ServerConfig): Record<string, string>;
  /** --a / --a-env and --b / --b-env: the two sides of an A/B scenario. */
  sides: [SideSpec, SideSpec];
  /** --a: another checkout. */
  otherCheckout?: string;
  /** --protocol, for the generic health-ab scenario. */
  protocol?: Protocol;
}

export type WorkloadName = "12MP JPEG" | "1MP JPEG" | "2MP PNG";

/** Scenario is one row of the table. */
export interface Scenario {
  name: string;
  workload: string;
  protocol: string;
  concurrency: string;
  server: string;
  target?: Target;
  /** Run by `npm run bench` without --scenario. */
  inDefault: boolean;
  /** The options it needs (--a ...), if any. */
  needs?: string;
  /** How it is measured (bench/RESULTS.md). */
  how: string;
  run(ctx: Ctx): Promise<Measured>;
}

const q = (ctx: Ctx, full: number, quick: number) => (ctx.quick ? quick : full);
const f = (v: number, d = 2) => (Number.isFinite(v) ? v.toFixed(d) : "–");
const ms = (v: number) => (Number.isFinite(v) ? (v >= 100 ? v.toFixed(0) : v.toFixed(1)) : "–");
const mb = (bytes: number) => (bytes / 1e6).toFixed(0);
const sleep = (s: number) => new Promise((r) => setTimeout(r, s * 1000));

// --- e2e over the floor ------------------------------------------------------------------------

const E2E_HOW =
  "The floor is the engine's own code for one photo: `analyzeImage()` in the bench process with one analysis worker's " +
  "settings (one onnxruntime intra-op thread per session, sharp's cache off), no HTTP, JSON, base64, hand-over or queue. " +
  "Each of 10 paired rounds (3 with --quick) runs the floor once and one request at c=1 against the server (REST: " +
  "autocannon; gRPC: a @grpc/grpc-js client, binary protobuf), alternating which goes first, so that a machine whose " +
  "speed drifts moves both sides alike. Measured: the median request time over the median floor time.";

function e2eFloor(protocol: Protocol): Scenario {
  return {
    name: `e2e-floor-${protocol.toLowerCase()}`,
    workload: "12MP JPEG",
    protocol,
    concurrency: "1",
    server: SERVERS.bench.name,
    target: { op: "≤", value: 1.25, unit: "x", from: "issue 4" },
    inDefault: true,
    how: E2E_HOW,
    async run(ctx) {
      const w = ctx.workload("12MP JPEG");
      const server = await ctx.server(SERVERS.bench);
      const rounds = await pairedFloor(server, ctx.key, w, protocol, await ctx.engine(), q(ctx, 10, 3), ctx.log);
      const floor = median(rounds.map((r) => r.floor));
      const request = median(rounds.map((r) => r.request));
      return {
        value: request / floor,
        text: `${f(request / floor)}x`,
        detail: `request p50 ${ms(request)} ms, floor ${ms(floor)} ms (medians of ${rounds.length} rounds); per round ${rounds.map((r) => f(r.request / r.floor)).join(", ")}`,
      };
    },
  };
}

// --- scaling c=2 / c=1 -------------------------------------------------------------------------

const SCALING_HOW =
  "Paired rounds on one server and connection setup: each of 6 rounds (2 with --quick) runs 6 requests at c=1 and 12 " +
  "at c=2 back to back (closed loops; alternating which goes first), after an untimed warm-up. Measured: all 200s over " +
  "all wall time at c=2 over the same at c=1 (pooled over the rounds). The detail gives the server's cores and CPU per " +
  "request and the machine's idle time: the pooled ratio is (server cores at c=2 / at c=1) x (CPU per request at c=1 / at c=2). " +
  "Read it next to engine-scaling, what the engine alone allows on the same machine.";

function scalingScenario(protocol: Protocol): Scenario {
  return {
    name: `scaling-${protocol.toLowerCase()}`,
    workload: "12MP JPEG",
    protocol,
    concurrency: "1 vs 2",
    server: SERVERS.bench.name,
    target: { op: "≥", value: 1.7, unit: "x", from: "issue 4, kept by issue 18" },
    inDefault: true,
    how: SCALING_HOW,
    async run(ctx) {
      const server = await ctx.server(SERVERS.bench);
      const s = await scaling(
        server,
        ctx.key,
        ctx.workload("12MP JPEG"),
        protocol,
        q(ctx, 6, 2),
        { 1: q(ctx, 6, 3), 2: q(ctx, 12, 4) },
        ctx.log,
      );
      const ratio = s.pooled[1] / s.pooled[0];
      return {
        value: ratio,
        text: `${f(ratio)}x`,
        detail:
          `req/s c=1 ${f(s.pooled[0])}, c=2 ${f(s.pooled[1])}; per round ${s.rounds.map(([a, b]) => f(b / a)).join(", ")}; ` +
          `server cores ${f(s.serverCpu[0])} → ${f(s.serverCpu[1])} (load generator ${f(s.clientCpu[0])} → ${f(s.clientCpu[1])}); ` +
          `server CPU per request ${f(s.cpuPerRequest[0], 0)} / ${f(s.cpuPerRequest[1], 0)} ms; machine idle ${f(s.idle[0])} → ${f(s.idle[1])} cores, steal ${f(s.steal[0])} → ${f(s.steal[1])}`,
      };
    },
  };
}

const ENGINE_SCALING: Scenario = {
  name: "engine-scaling",
  workload: "12MP JPEG",
  protocol: "none (engine alone)",
  concurrency: "1 vs 2",
  server: "none: the analyzer's worker pool in the bench process",
  inDefault: true,
  how:
    "The engine alone: the analyzer's worker pool (the server's default worker count) started by the bench process, with " +
    "no server running, fed by 1 and then 2 closed loops in the same paired rounds as scaling-*, with no HTTP, JSON, base64 " +
    "or load generator. Reported next to scaling-*: what the engine itself allows on this machine.",
  async run(ctx) {
    await ctx.stopServer();
    const { createAnalyzer } = await import("../src/inference/analyzer.js");
    const analyzer = await createAnalyzer();
    try {
      const rounds = await engineScaling(analyzer, ctx.workload("12MP JPEG").bytes, q(ctx, 6, 2), q(ctx, 6, 3));
      const ratio = pooledRatio(rounds);
      const em = (pick: (r: (typeof rounds)[number]) => number) => median(rounds.map(pick));
      return {
        value: ratio,
        text: `${f(ratio)}x`,
        detail:
          `analyses/s c=1 ${f(em((r) => r.c1.rps))}, c=2 ${f(em((r) => r.c2.rps))}; per round ${rounds.map((r) => f(r.c2.rps / r.c1.rps)).join(", ")}; ` +
          `cores ${f(em((r) => r.c1.cores))} → ${f(em((r) => r.c2.cores))}; CPU per analysis ${f(
            em((r) => r.c1.cpuMs),
            0,
          )} / ${f(
            em((r) => r.c2.cpuMs),
            0,
          )} ms; ` +
          `machine idle ${f(em((r) => r.c1.idle))} → ${f(em((r) => r.c2.idle))} cores`,
      };
    } finally {
      await analyzer.close();
    }
  },
};

// --- peak RSS ----------------------------------------------------------------------------------

const RSS_HOW =
  "48 requests (16 with --quick) at c=16 against the bench server, whose queue admits all 16. Peak RSS is summed over the " +
  "server and its analysis worker processes (/proc/<pid>/status VmRSS sampled every 50 ms, and each process's VmHWM " +
  "reset through /proc/<pid>/clear_refs before the cell): an upper bound, since each process counts its own mapping of " +
  "Node, sharp and onnxruntime.";

function rssScenario(protocol: Protocol): Scenario {
  return {
    name: `rss-c16-${protocol.toLowerCase()}`,
    workload: "12MP JPEG",
    protocol,
    concurrency: "16",
    server: SERVERS.bench.name,
    target: { op: "≤", value: 1500, unit: "MB", from: "issue 4" },
    inDefault: true,
    how: RSS_HOW,
    async run(ctx) {
      const server = await ctx.server(SERVERS.bench);
      const c = await withCells(server, ctx.key, ctx.workload("12MP JPEG"), protocol, (cell) => cell(16, q(ctx, 48, 16)));
      return {
        value: c.peakRss / 1e6,
        text: `${mb(c.peakRss)} MB`,
        detail: `${c.ok} x 200 of ${c.n} (${c.overloaded} x 503${c.otherDetails.length ? `; ${c.otherDetails.join("; ")}` : ""}); ${f(c.rps)} req/s, p50 ${ms(c.p50)} ms, p99 ${ms(c.p99)} ms; server ${f(c.cpu)} cores`,
      };
    },
  };
}

// --- health ------------------------------------------------------------------------------------

const HEALTH_HOW =
  "GET /v1/palm/health from a 50 Hz probe (one request at a time, keep-alive, in a thread of its own so that the load " +
  "generator's stalls are not timed): first 5 s idle (2 s with --quick), then while 4 analyses are kept in flight " +
  "(2 running, 2 queued on 2 cores) for 20 s (4 s), probing from 1.5 s in. Measured: the p99 under load; the detail " +
  "gives the idle p99 of the same server just before.";

async function idleProbe(ctx: Ctx, server: ServerProcess): Promise<number[]> {
  await sleep(1);
  return probeHealth(server.url, sleep(q(ctx, 5, 2)));
}

function healthScenario(protocol: Protocol): Scenario {
  return {
    name: `health-${protocol.toLowerCase()}-load`,
    workload: "12MP JPEG",
    protocol,
    concurrency: "4 + probe",
    server: SERVERS.bench.name,
    target: { op: "≤", value: 20, unit: "ms", from: "issue 4" },
    inDefault: true,
    how: HEALTH_HOW,
    async run(ctx) {
      const server = await ctx.server(SERVERS.bench);
      const idle = await idleProbe(ctx, server);
      const loaded = await saturatedHealth(server, ctx.key, ctx.workload("12MP JPEG"), protocol, q(ctx, 20, 4));
      const p99 = quantile(loaded.probes, 0.99);
      const idleP99 = quantile(idle, 0.99);
      return {
        value: p99,
        text: `${ms(p99)} ms`,
        detail: `${loaded.probes.length} probes, p50 ${ms(median(loaded.probes))}, max ${ms(Math.max(...loaded.probes))} ms; idle p99 ${ms(idleP99)} ms (${idle.length} probes), loaded / idle ${f(p99 / idleP99)}x; ${f(loaded.rps)} analyses/s, peak RSS ${mb(loaded.peakRss)} MB`,
      };
    },
  };
}

// --- keyless bodies (issue 20) -----------------------------------------------------------------

const KEYLESS_HOW =
  "A message of exactly 8 MiB (the largest the server accepts) with no API key, sent with Node's http2 client, one call " +
  "after another, each on the client's connection or on a new one where the server closed it (3 untimed first), 40 calls " +
  "(10 with --quick); connection set-up is in the figure. Measured from the server's side: " +
  "the CPU time of its main thread (the event loop) per call, from /proc/<pid>/task/<pid>/schedstat (nanoseconds), less " +
  "the rate the same thread runs at while idle (one second just before). The detail gives all the server's threads " +
  "together per call, the time the client waits for the answer's headers, and the answers seen (grpc-status 16 / HTTP 401: " +
  "unauthenticated). The loopback upload itself is in the client's time, not the server's CPU.";

function keylessScenario(protocol: "gRPC" | "Connect"): Scenario {
  return {
    name: `keyless-8mib-${protocol.toLowerCase()}`,
    workload: "8 MiB message, no API key",
    protocol,
    concurrency: "1",
    server: SERVERS.default.name,
    target: { op: "<", value: 1, unit: "ms", from: "issue 20" },
    inDefault: true,
    how: KEYLESS_HOW,
    async run(ctx) {
      const server = await ctx.server(SERVERS.default);
      const c = await keylessCost(server, protocol, q(ctx, 40, 10));
      return {
        value: c.eventLoopMs,
        text: `${f(c.eventLoopMs)} ms`,
        detail:
          `event loop ${f(c.eventLoopMs)} ms and all server threads ${f(c.processMs)} ms of CPU per call; client waits p50 ${ms(c.firstByteP50)}, ` +
          `p99 ${ms(c.firstByteP99)} ms for the answer; ${c.connections} connections; answers: ${Object.entries(c.outcomes)
            .map(([k, n]) => `${n} x ${k}`)
            .join(", ")}`,
      };
    },
  };
}

const KEYLESS_FLOOD: Scenario = {
  name: "health-keyless-flood",
  workload: "8 MiB message, no API key",
  protocol: "gRPC + Connect",
  concurrency: "16 + probe",
  server: SERVERS.default.name,
  inDefault: true,
  how:
    "The health probe of health-*-load, first 5 s idle (2 s with --quick), then while 16 clients, each on its own HTTP/2 " +
    "connection (8 gRPC, 8 Connect), send keyless 8 MiB messages back to back for 15 s (4 s), probing from 1.5 s in. " +
    "Measured: the p99 under the flood, next to the idle p99 of the same server. Issue 20 names no bound for it yet.",
  async run(ctx) {
    const server = await ctx.server(SERVERS.default);
    const idle = await idleProbe(ctx, server);
    const seconds = q(ctx, 15, 4);
    const stop = sleep(seconds);
    const t0 = performance.now();
    const flood = keylessFlood(server, 16, stop);
    await sleep(1.5);
    const probes = await probeHealth(server.url, stop);
    const { calls, outcomes } = await flood;
    const wall = (performance.now() - t0) / 1000;
    const p99 = quantile(probes, 0.99);
    const idleP99 = quantile(idle, 0.99);
    return {
      value: p99,
      text: `${ms(p99)} ms`,
      detail:
        `idle p99 ${ms(idleP99)} ms, flood / idle ${f(p99 / idleP99)}x; ${probes.length} probes, p50 ${ms(median(probes))}, max ${ms(Math.max(...probes))} ms; ` +
        `${f(calls / wall, 1)} keyless calls/s answered; ${Object.entries(outcomes)
          .map(([k, n]) => `${n} x ${k}`)
          .join(", ")}`,
    };
  },
};

// --- opt-in: the floor, the grid of cells, overload --------------------------------------------

const FLOOR: Scenario = {
  name: "floor",
  workload: "12MP JPEG, 1MP JPEG, 2MP PNG",
  protocol: "none (engine in-process)",
  concurrency: "1",
  server: "none",
  inDefault: false,
  how: "The floor (`analyzeImage()` in the bench process, one worker's settings) and its stages from the engine's own timings (decode, hand landmarks, palm frame, line model, post-processing, mask PNGs, overlay JPEG), median of 5 runs (2 with --quick) after an untimed one, per workload.",
  async run(ctx) {
    const ws = (["12MP JPEG", "1MP JPEG", "2MP PNG"] as const).map((n) => ctx.workload(n));
    const rows = await measureFloor(ws, { iterations: q(ctx, 5, 2) });
    return {
      value: Number.NaN,
      text: rows.map((r) => `${r.workload} ${ms(r.total)} ms`).join(", "),
      detail: rows
        .map(
          (r) =>
            `${r.workload}: decode ${ms(r.decode)}, landmarks ${ms(r.landmarks)}, frame ${ms(r.frame)}, line model ${ms(r.inference)}, post ${ms(r.postprocess)}, ` +
            `masks ${ms(r.maskEncode)}, overlay ${ms(r.overlayEncode)} ms, ${f(r.cores)} cores, lines ${r.detected.join("+") || "none"}`,
        )
        .join("; "),
    };
  },
};

function cellsScenario(workload: WorkloadName, protocol: Protocol): Scenario {
  return {
    name: `cells-${workload.toLowerCase().replace(/\s+/g, "-")}-${protocol.toLowerCase()}`,
    workload,
    protocol,
    concurrency: "1, 2, 4, 16",
    server: SERVERS.bench.name,
    inDefault: false,
    how: "Closed-loop cells at c=1, 2, 4 and 16 (8/12/16/48 requests for 12 MP, 12/16/24/48 for the smaller workloads; fewer with --quick) after a warm-up: req/s of the 200s, p50, p99, peak RSS and server cores per cell.",
    async run(ctx) {
      const w = ctx.workload(workload);
      const server = await ctx.server(SERVERS.bench);
      const big = w.width * w.height > 4_000_000;
      const amounts = ctx.quick ? (big ? [3, 4, 8, 16] : [4, 6, 8, 16]) : big ? [8, 12, 16, 48] : [12, 16, 24, 48];
      const cells = await withCells(server, ctx.key, w, protocol, async (cell) => {
        const out = [];
        for (const [i, c] of [1, 2, 4, 16].entries()) out.push(await cell(c, amounts[i]));
        return out;
      });
      return {
        value: Number.NaN,
        text: `${cells.map((c) => `c=${c.c} ${f(c.rps)}`).join(", ")} req/s`,
        detail: cells
          .map(
            (c) => `c=${c.c}: ${c.ok}/${c.n} x 200, p50 ${ms(c.p50)} p99 ${ms(c.p99)} ms, peak RSS ${mb(c.peakRss)} MB, ${f(c.cpu)} cores`,
          )
          .join("; "),
      };
    },
  };
}

const OVERLOAD: Scenario = {
  name: "overload-default-queue",
  workload: "12MP JPEG",
  protocol: "REST",
  concurrency: "16",
  server: SERVERS.default.name,
  inDefault: false,
  how: "c=16 for 8 s (4 s with --quick) against the default admission bound (2 running + 4 queued on 2 cores): the excess is refused at once with 503 overloaded, so latency mixes fast refusals with full analyses.",
  async run(ctx) {
    const server = await ctx.server(SERVERS.default);
    const w = ctx.workload("12MP JPEG");
    await restCell(server, ctx.key, w, 2, 2);
    const c = await restCell(server, ctx.key, w, 16, 0, q(ctx, 8, 4));
    return {
      value: Number.NaN,
      text: `${c.ok} x 200, ${c.overloaded} x 503`,
      detail: `${c.n} requests, other ${c.other}${c.otherDetails.length ? ` (${c.otherDetails.join("; ")})` : ""}; ${f(c.rps)} req/s of 200s; p50 ${ms(c.p50)} p99 ${ms(c.p99)} ms; peak RSS ${mb(c.peakRss)} MB`,
    };
  },
};

// --- opt-in: A/B comparisons -------------------------------------------------------------------

const AB_HEALTH_HOW =
  "Two servers side by side (each side a checkout and an environment), both idle but for the one measured; in each of " +
  "4 rounds (2 with --quick), in alternating order, each gets the health-*-load measurement for 15 s (4 s). Measured: " +
  "median p99 of B over median p99 of A.";

function healthAb(name: string, a: Record<string, string> | undefined, protocol: Protocol | undefined, what: string): Scenario {
  return {
    name,
    workload: "12MP JPEG",
    protocol: protocol ?? "--protocol (default gRPC)",
    concurrency: "4 + probe",
    server: a
      ? `A: ${Object.entries(a)
          .map(([k, v]) => `${k}=${v}`)
          .join(", ")}; B: bench`
      : "A: --a DIR / --a-env K=V; B: --b DIR / --b-env K=V",
    inDefault: false,
    needs: a ? undefined : "--a DIR or --a-env K=V[,K=V]",
    how: `${what} ${AB_HEALTH_HOW}`,
    async run(ctx) {
      await ctx.stopServer();
      const sides: [SideSpec, SideSpec] = a ? [{ env: a }, { env: {} }] : ctx.sides;
      const p = protocol ?? ctx.protocol ?? "gRPC";
      const r = await abHealth(
        sides,
        ctx.envOf(SERVERS.bench),
        ctx.key,
        ctx.workload("12MP JPEG"),
        p,
        q(ctx, 4, 2),
        q(ctx, 15, 4),
        ctx.log,
      );
      const [pa, pb] = r.sides.map(medianP99);
      const side = (i: number) =>
        `${"AB"[i]} (${describeSide(sides[i])}): p99 ${r.sides[i].map((x) => ms(x.p99)).join(", ")} ms, max ${r.sides[i].map((x) => ms(x.max)).join(", ")} ms, ${f(median(r.sides[i].map((x) => x.rps)))} analyses/s`;
      return { value: pb / pa, text: `B / A ${f(pb / pa)}x (${ms(pb)} / ${ms(pa)} ms)`, detail: `${p}; ${side(0)}; ${side(1)}` };
    },
  };
}

const AB_THROUGHPUT: Scenario = {
  name: "ab-throughput",
  workload: "12MP JPEG",
  protocol: "gRPC, REST",
  concurrency: "1, 2",
  server: "A: --a DIR / --a-env K=V; B: --b DIR / --b-env K=V",
  inDefault: false,
  needs: "--a DIR or --a-env K=V[,K=V]",
  how:
    "Two servers side by side (each side a checkout and an environment, on the bench configuration), both idle but for " +
    "the one measured; in each of 4 rounds (2 with --quick), in a rotating order, each gets closed loops of 6 requests " +
    "(3) over gRPC and REST at c=1 and c=2. Measured: B over A req/s per cell, pooled over the rounds (harmonic mean).",
  async run(ctx) {
    await ctx.stopServer();
    const r = await abThroughput(
      ctx.sides,
      ctx.envOf(SERVERS.bench),
      ctx.key,
      ctx.workload("12MP JPEG"),
      q(ctx, 4, 2),
      q(ctx, 6, 3),
      ctx.log,
    );
    const parts = [...r.cells].map(
      ([cell, [a, b]]) => `${cell} ${f(pooledRps(b) / pooledRps(a))}x (A ${f(median(a))}, B ${f(median(b))} req/s)`,
    );
    const c21 = (i: 0 | 1, p: string) => pooledRps(r.cells.get(`${p} c=2`)![i]) / pooledRps(r.cells.get(`${p} c=1`)![i]);
    return {
      value: Number.NaN,
      text: parts.map((s) => s.split(" (")[0]).join("; "),
      detail: `A: ${describeSide(ctx.sides[0])}; B: ${describeSide(ctx.sides[1])}; ${parts.join("; ")}; c=2 / c=1 gRPC A ${f(c21(0, "gRPC"))}x B ${f(c21(1, "gRPC"))}x, REST A ${f(c21(0, "REST"))}x B ${f(c21(1, "REST"))}x`,
    };
  },
};

const ENGINE_AB: Scenario = {
  name: "engine-ab",
  workload: "README sample at 12 MP and 1 MP, a photo without a hand at 1 MP (+ IMG_0384 of ../shared/real-palms when present)",
  protocol: "none (engine in-process)",
  concurrency: "1",
  server: "none: this checkout's engine against --a DIR's",
  inDefault: false,
  needs: "--a DIR",
  how:
    "Both checkouts' `analyzeImage()` in the bench process (one onnxruntime thread per session, sharp's cache off), on " +
    "the same bytes, 10 rounds (3 with --quick) after an untimed warm-up, alternating which runs first. Measured: the " +
    "median of the per-round ratios this / a (issue 18 held the hands-first engine to ≤ 1.15x against 3d254ae: 1.104x, " +
    "docs/decisions/hands-first-engine-cost.md).",
  async run(ctx) {
    if (!ctx.otherCheckout) throw new Error("engine-ab needs --a DIR (another checkout with node_modules)");
    await ctx.stopServer();
    const rows = await engineAb(ctx.otherCheckout, q(ctx, 10, 3));
    return {
      value: rows[0].ratio,
      text: `${f(rows[0].ratio, 3)}x`,
      detail: rows
        .map(
          (r) =>
            `${r.workload}: ${r.names[0]} ${ms(r.ms[0])} ms, ${r.names[1]} ${ms(r.ms[1])} ms, this / a ${f(r.ratio, 3)}x, lines ${r.lines[0]} / ${r.lines[1]}`,
        )
        .join("; "),
    };
  },
};

const UPLOAD_WINDOW: Scenario = {
  name: "upload-window",
  workload: "3.6 MB noise after a JPEG header (refused as invalid_image once read)",
  protocol: "gRPC",
  concurrency: "1",
  server: "two in-process servers: ours and HTTP/2's default 64 KiB windows, behind a delaying TCP proxy",
  inDefault: false,
  how:
    "A grpc-js client uploads 3.6 MB to each server in turn (15 calls each, 5 with --quick, after one that opens the " +
    "connection), directly and behind a TCP proxy holding each chunk 0, 2 and 5 ms each way. Measured: default / ours " +
    "median upload time at a 10 ms round trip (docs/decisions/http2-windows-8mib.md).",
  async run(ctx) {
    const { variants, rows } = await uploadWindows(q(ctx, 15, 5));
    const link = (r: (typeof rows)[number]) => (r.oneWayMs === undefined ? "loopback" : `${2 * r.oneWayMs} ms RTT`);
    const last = rows[rows.length - 1];
    return {
      value: last.ms[1] / last.ms[0],
      text: `${f(last.ms[1] / last.ms[0])}x at ${link(last)}`,
      detail:
        `${variants[0]} / ${variants[1]}: ` +
        rows.map((r) => `${link(r)} ${ms(r.ms[0])} / ${ms(r.ms[1])} ms (${f(r.ms[1] / r.ms[0])}x)`).join("; "),
    };
  },
};

// --- lean answers ------------------------------------------------------------------------------

const LEAN_ANSWER: Scenario = {
  name: "lean-answer-rest",
  workload: "12MP JPEG",
  protocol: "REST (image/jpeg body)",
  concurrency: "1",
  server: SERVERS.bench.name,
  target: { op: "≤", value: 0.7, unit: "x", from: "issue 31" },
  inDefault: true,
  how:
    "The photo uploaded as the raw file (`Content-Type: image/jpeg`, no base64), one request at a time, with each `images` " +
    `option: the full answer (no option), \`?images=none\`, \`?images=masks\` and \`?images=overlay&max_overlay_side=${LEAN_OVERLAY_SIDE}\`. ` +
    "Each of 12 rounds (4 with --quick) sends all four after one untimed round, in orders that form a balanced Latin " +
    "square (over each 4 rounds every variant is once in each position and once right after each other variant). " +
    "Time: from sending the request to the answer's last byte (fetch); server CPU: the user + system time of the server " +
    "and its workers over the same span (/proc, 10 ms ticks), which a shared machine's load inflates far less than time. " +
    "Measured: the median time without images over the median full time. The detail gives every variant's medians, their " +
    "ratios to the full answer and the answer's size; the run also prints them as a table.",
  async run(ctx) {
    const w = ctx.workload("12MP JPEG");
    const server = await ctx.server(SERVERS.bench);
    const rounds = await leanRounds(server, ctx.key, w, q(ctx, 12, 4));
    for (const line of restTable(rounds).split("\n")) ctx.log(line);
    const at = (i: number) => ({
      ms: median(rounds.map((r) => r[i].ms)),
      cpuMs: median(rounds.map((r) => r[i].cpuMs)),
      bytes: median(rounds.map((r) => r[i].bytes)),
    });
    const full = at(0);
    const kb = (b: number) => (b / 1024).toFixed(b < 10 * 1024 ? 1 : 0);
    return {
      value: at(1).ms / full.ms,
      text: `${f(at(1).ms / full.ms)}x`,
      detail:
        `p50 over ${rounds.length} rounds: ` +
        LEAN_VARIANTS.map(
          (v, i) =>
            `${v.name} ${ms(at(i).ms)} ms (${f(at(i).ms / full.ms)}x), server CPU ${ms(at(i).cpuMs)} ms (${f(at(i).cpuMs / full.cpuMs)}x), ${kb(at(i).bytes)} KB`,
        ).join("; ") +
        `; none / full per round ${rounds.map((r) => f(r[1].ms / r[0].ms)).join(", ")}`,
    };
  },
};

const LEAN_ENGINE: Scenario = {
  name: "lean-answer-engine",
  workload: "12MP JPEG",
  protocol: "none (engine in-process)",
  concurrency: "1",
  server: "none",
  inDefault: true,
  how:
    "Where lean-answer-rest's time goes: `analyzeImage()` in the bench process with one analysis worker's settings (as the " +
    "floor), with each of lean-answer-rest's four `images` variants, 12 rounds (4 with --quick) in the same orders, after " +
    "one untimed round. Reported: the median milliseconds of each engine stage per variant, and of the CPU time the bench " +
    "process spent on the analysis (every thread: libvips, onnxruntime; printed as a " +
    "table); the end-to-end difference beyond the engine's is the serving path's (hand-over, base64, JSON, HTTP).",
  async run(ctx) {
    await ctx.stopServer();
    const rounds = await leanEngineRounds(await ctx.engine(), ctx.workload("12MP JPEG"), q(ctx, 12, 4));
    for (const line of engineTable(rounds).split("\n")) ctx.log(line);
    const total = (i: number) => median(rounds.map((r) => r[i].total));
    const stage = (i: number, s: "overlayEncode" | "maskEncode" | "cpuMs") => median(rounds.map((r) => r[i][s]));
    return {
      value: total(1) / total(0),
      text: `${f(total(1) / total(0))}x`,
      detail:
        `engine total p50 over ${rounds.length} rounds: ` +
        LEAN_VARIANTS.map(
          (v, i) =>
            `${v.name} ${ms(total(i))} ms (${f(total(i) / total(0))}x), CPU ${ms(stage(i, "cpuMs"))} ms (${f(stage(i, "cpuMs") / stage(0, "cpuMs"))}x)`,
        ).join("; ") +
        `; the full answer's overlay ${ms(stage(0, "overlayEncode"))} ms and masks ${ms(stage(0, "maskEncode"))} ms` +
        `; overlay at ${LEAN_OVERLAY_SIDE} ${ms(stage(3, "overlayEncode"))} ms`,
    };
  },
};

// --- fair under abuse (issue 29) ----------------------------------------------------------------

const JPEG_SCANS: Scenario = {
  name: "jpeg-scan-cost",
  workload: "10000x4000 JPEG: baseline, progressive, 64 and 2,647 scans",
  protocol: "(decode in the bench process)",
  concurrency: "1",
  server: "none",
  target: { op: "≤", value: 3, unit: "x", from: "issue 29: a few times an ordinary photo of its pixel size" },
  inDefault: false,
  how:
    "Each file decoded as the engine decodes it (sharp: flattened, sRGB, raw 8-bit) without the scan bound, 5 rounds (2 " +
    "with --quick) after an untimed one, the files in turn within a round (the 2,647-scan attack in the first round " +
    "only: it takes seconds). The 64-scan file is the costliest the bound lets through: every scan over the whole " +
    "image. Measured: its median decode time over the baseline photo's (docs/decisions/jpeg-scan-limit.md).",
  async run(ctx) {
    await ctx.stopServer();
    const costs = await jpegScanCosts(q(ctx, 5, 2));
    const base = costs[0].ms;
    const bound = costs.find((c) => c.scans === 64)!;
    return {
      value: bound.ms / base,
      text: `${f(bound.ms / base)}x`,
      detail: costs
        .map((c) => `${c.name} (${c.scans} scans, ${(c.bytes / 1024).toFixed(0)} KiB) ${ms(c.ms)} ms, ${f(c.ms / base)}x`)
        .join("; "),
    };
  },
};

function abuseScenario(limits: "default" | "lifted"): Scenario {
  return {
    name: limits === "default" ? "abuse-victim" : "abuse-victim-unlimited",
    workload: "victim: 640x480 JPEG as JSON; attacker: issue 29's abuses 1-3",
    protocol: "REST (victim); Connect, REST (attacker)",
    concurrency: "1 + attacker",
    server:
      limits === "default"
        ? "`npm start` on Redis, PALM_WORKERS=1, PALM_MAX_QUEUE=0, default per-client limits (attacker on free, victim on pro)"
        : "`npm start` on Redis, PALM_WORKERS=1, PALM_MAX_QUEUE=0, per-client limits lifted",
    target: limits === "default" ? { op: "≤", value: 2, unit: "x", from: "issue 29" } : undefined,
    inDefault: false,
    how:
      "One server and two clients with keys of their own, the clients in a process of their own (bench/abuse-clients.ts), " +
      "one such process per layout. 3 rounds (1 with --quick), each of three layouts in turn, each of four phases of 8 s (3 s " +
      "with --quick): the victim alone; then while the attacker sends (1) 10,000 x 4,000 PNG analyses with a 100 ms Connect " +
      "deadline one after another, (2) 14 REST bodies of 7.4 MiB invalid base64 at once, again as soon as all are answered, " +
      "(3) the 2,647-scan 10,000 x 4,000 JPEG one after another. The victim sends its request one after another throughout " +
      "(the full answer; time to the last byte). Layouts: shared (nothing pinned, the clients on the server's cores at its " +
      "priority: the layout of the runs before 2026-11-26), split (taskset: the server, its workers and Redis on every CPU but " +
      "the last, the clients on the last), niced (nothing pinned, the clients at nice 19). Measured: in the split layout, the " +
      "largest of the three p50 under abuse / p50 alone (pooled over the rounds). The run prints a table of every layout's p50 " +
      "and ratio side by side, the CPU seconds per second of the server (with its workers and Redis) and of the clients, and " +
      "the load average at the start and the end. abuse-victim: the default per-client limits, the attacker on the free plan " +
      "(the issue's attacker had a 5-request plan); abuse-victim-unlimited: no per-client limit, so only the engine's own " +
      "bounds and fair queues stand between the two.",
    async run(ctx) {
      await ctx.stopServer();
      const run = await abuseVictim(q(ctx, 3, 1), q(ctx, 8, 3), limits, ctx.log);
      const ratiosOf = (results: PhaseResult[]) => results.map((r) => median(r.ms) / median(results[0].ms));
      const worstOf = (layout: Layout) => Math.max(...ratiosOf(run.byLayout[layout]).slice(1));
      const tally = (counts: Record<string | number, number>) =>
        Object.entries(counts)
          .map(([c, n]) => `${n}x${c}`)
          .join(", ");
      ctx.log(
        `load average ${run.load.start.map((l) => f(l)).join(" ")} at the start, ${run.load.end.map((l) => f(l)).join(" ")} at the end; ` +
          `split: server and Redis on CPUs ${run.cpus.server}, clients on ${run.cpus.clients}`,
      );
      ctx.log(
        `| phase | ${LAYOUTS.map((l) => `${l}: victim p50 | / alone`).join(" | ")} | CPU s/s server+Redis, clients (${LAYOUTS.join(" / ")}) |`,
      );
      ctx.log(`|---|${LAYOUTS.map(() => "---|---").join("|")}|---|`);
      for (const [i, phase] of PHASES.entries()) {
        const cells = LAYOUTS.map((l) => `${ms(median(run.byLayout[l][i].ms))} ms | ${f(ratiosOf(run.byLayout[l])[i])}x`);
        const cpu = LAYOUTS.map((l) => `${f(run.byLayout[l][i].cpu.server)}, ${f(run.byLayout[l][i].cpu.clients)}`).join(" / ");
        ctx.log(`| ${phase} | ${cells.join(" | ")} | ${cpu} |`);
      }
      const worst = worstOf("split");
      return {
        value: worst,
        text: `${f(worst)}x`,
        detail:
          `worst p50 under abuse / alone: ${LAYOUTS.map((l) => `${l} ${f(worstOf(l))}x`).join(", ")}; ` +
          LAYOUTS.map(
            (l) =>
              `${l}: ` +
              run.byLayout[l]
                .map((r) => `${r.phase} p50 ${ms(median(r.ms))} ms (victim ${tally(r.statuses)}; attacker ${tally(r.attacks) || "-"})`)
                .join("; "),
          ).join(" | ") +
          `; load average ${f(run.load.start[0])} → ${f(run.load.end[0])}`,
      };
    },
  };
}

const REFUSAL_COST: Scenario = {
  name: "refusal-cost",
  workload: "a free client past its burst: 2-byte REST requests, and 7.4 MiB uploads",
  protocol: "REST (HTTP/1.1)",
  concurrency: "16 (small), 14 (upload)",
  server: "`npm start` on Redis, PALM_WORKERS=1, default per-client limits; --a DIR's and this checkout's, pinned apart from the client",
  inDefault: false,
  needs: "--a DIR",
  how:
    "One Redis, and one server of each checkout (--a DIR's, then this one's) on it with a key of its own on the free plan " +
    "(1 a second, burst 10). The servers and Redis are pinned (taskset) to every CPU but the last, the bench process (the " +
    "client) to the last. 3 rounds (1 with --quick); in each, for each kind, each server in turn is flooded for 8 s (3 s " +
    "with --quick): small, 16 loops of keyed REST requests of 2 bytes over kept-alive connections; upload, 14 requests " +
    "of 7.4 MiB of invalid base64, each on its own HTTP/1.1 connection, at once, again as soon as all are answered. The " +
    "client ignores Retry-After. Measured: the server's CPU (with its worker and Redis) per 429 rate_limited answer, this " +
    "checkout's over --a's (the about one request a second the rate lets in is counted in, on both sides alike); also the " +
    "refusals per second each served.",
  async run(ctx) {
    if (!ctx.otherCheckout) throw new Error("refusal-cost needs --a DIR (another checkout with node_modules)");
    await ctx.stopServer();
    const run = await refusalCost(ctx.otherCheckout, q(ctx, 3, 1), q(ctx, 8, 3), ctx.log);
    const per = (s: RefusalSide) => (1000 * s.cpuSeconds) / s.refused;
    ctx.log(
      `load average ${run.load.start.map((l) => f(l)).join(" ")} at the start, ${run.load.end.map((l) => f(l)).join(" ")} at the end; ` +
        `servers and Redis on CPUs ${run.cpus.server}, the client on ${run.cpus.clients}`,
    );
    ctx.log(
      "| kind | --a: CPU ms per refusal | refused/s | server CPU s/s | this: CPU ms per refusal | refused/s | server CPU s/s | this / --a per refusal |",
    );
    ctx.log("|---|---|---|---|---|---|---|---|");
    for (const kind of REFUSAL_KINDS) {
      const [a, b] = run.byKind[kind];
      const side = (s: RefusalSide) => `${f(per(s), 3)} | ${f(s.refused / s.seconds, 0)} | ${f(s.cpuSeconds / s.seconds)}`;
      ctx.log(`| ${kind} | ${side(a)} | ${side(b)} | ${f(per(b) / per(a))}x |`);
    }
    const ratios = REFUSAL_KINDS.map((k) => per(run.byKind[k][1]) / per(run.byKind[k][0]));
    return {
      value: Math.max(...ratios),
      text: REFUSAL_KINDS.map((k, i) => `${k} ${f(ratios[i])}x`).join(", "),
      detail: `${REFUSAL_KINDS.map((k) => {
        const [a, b] = run.byKind[k];
        return `${k}: --a ${f(per(a), 3)} ms CPU per refusal (${a.refused} of ${a.answers} in ${f(a.seconds, 0)} s), this ${f(per(b), 3)} ms (${b.refused} of ${b.answers} in ${f(b.seconds, 0)} s)`;
      }).join("; ")}; load average ${f(run.load.start[0])} → ${f(run.load.end[0])}`,
    };
  },
};

const RATE_CLUSTER: Scenario = {
  name: "rate-limit-cluster",
  workload: "keyed REST calls refused at once (400 missing_image), one client",
  protocol: "REST",
  concurrency: "16",
  server: "two `npm start` replicas on one three-master Redis Cluster, pro plan at 50/s, burst 10",
  target: { op: "≤", value: 5, unit: "%", from: "issue 29" },
  inDefault: false,
  how:
    "A three-master Redis Cluster and two replicas on it. 16 loops send one pro client's requests to the two replicas in " +
    "turn for 20 s (5 s with --quick): bodies the door lets in and the service refuses at once, so the gate sets the pace. " +
    "Let in: every answer but 429 rate_limited. Expected: burst + rate x the time from the first request sent to the " +
    "last. Measured: |let in / expected - 1|.",
  async run(ctx) {
    await ctx.stopServer();
    const r = await rateAcrossReplicas(50, 10, q(ctx, 20, 5));
    const off = Math.abs(r.admitted / r.expected - 1) * 100;
    return {
      value: off,
      text: `${f(off, 1)}%`,
      detail:
        `let in ${r.admitted} of ${r.admitted + r.limited} in ${f(r.seconds, 1)} s against ${f(r.expected, 0)} expected ` +
        `(${r.burst} + ${r.rate}/s x ${f(r.seconds, 1)} s): ${f(r.admitted / r.seconds, 1)}/s over the span`,
    };
  },
};

/** SCENARIOS: the table. The default ones first, in the order `npm run bench` runs them. */
export const SCENARIOS: readonly Scenario[] = [
  e2eFloor("REST"),
  e2eFloor("gRPC"),
  scalingScenario("REST"),
  scalingScenario("gRPC"),
  rssScenario("REST"),
  rssScenario("gRPC"),
  healthScenario("REST"),
  healthScenario("gRPC"),
  keylessScenario("gRPC"),
  keylessScenario("Connect"),
  KEYLESS_FLOOD,
  LEAN_ANSWER,
  LEAN_ENGINE,
  ENGINE_SCALING,
  FLOOR,
  cellsScenario("12MP JPEG", "REST"),
  cellsScenario("12MP JPEG", "gRPC"),
  cellsScenario("1MP JPEG", "REST"),
  cellsScenario("1MP JPEG", "gRPC"),
  cellsScenario("2MP PNG", "REST"),
  cellsScenario("2MP PNG", "gRPC"),
  OVERLOAD,
  healthAb(
    "health-ab-codec",
    { PALM_REST_CODEC_THREADS: "0" },
    "REST",
    "REST JSON and base64 on the event loop (A) against the codec worker threads (B), under REST load (docs/decisions/rest-codec-threads.md).",
  ),
  healthAb("health-ab", undefined, undefined, "Any two sides (--a/--a-env against --b/--b-env, --protocol gRPC|REST)."),
  AB_THROUGHPUT,
  ENGINE_AB,
  UPLOAD_WINDOW,
  JPEG_SCANS,
  abuseScenario("default"),
  abuseScenario("lifted"),
  REFUSAL_COST,
  RATE_CLUSTER,
];
