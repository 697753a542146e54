/**
 * Closed-loop cells against a server process: `amount` analyses of one workload at concurrency
 * `c`, over REST (autocannon) or gRPC (a @grpc/grpc-js loop, binary protobuf), with the server's
 * peak RSS and CPU and the machine's idle and steal time; and the paired-round measurements built
 * on them (c=2 against c=1, a request against the floor).
 */
import { ErrorInfoSchema } from "../gen/google/rpc/error_details_pb.js";
import { PalmService } from "../gen/palm/v1/palm_pb.js";
import { analyzeImage, type PipelineEngine } from "../src/inference/pipeline.js";
import { callUnary, createGrpcJsClient, machineCores, machineCpu, trackPeakRss, type ServerProcess } from "../test/helpers/index.js";
import { analyzeLoad } from "./health-probe.js";
import { median, quantile } from "./stats.js";
import type { Workload } from "./workloads.js";

export type Protocol = "REST" | "gRPC";
export type GrpcClient = ReturnType<typeof createGrpcJsClient>;

/** Cell is one closed-loop measurement. */
export interface Cell {
  c: number;
  n: number;
  ok: number;
  overloaded: number;
  other: number;
  /** Non-200 outcomes other than overloaded, by status/code and message. */
  otherDetails: string[];
  /** 200s per second of wall time (to the last answer). */
  rps: number;
  p50: number;
  p99: number;
  peakRss: number;
  /** Server CPU use during the cell, in cores. */
  cpu: number;
  /** The whole machine's idle and steal CPU during the cell, in cores. */
  machine: { idle: number; steal: number };
  /** Wall time to the last answer, s. */
  wall: number;
}

/** restCell runs `amount` REST analyses of `w` over `c` connections (or for `duration` s when given). */
export async function restCell(
  server: ServerProcess,
  key: string,
  w: Workload,
  c: number,
  amount: number,
  duration?: number,
): Promise<Cell> {
  const t0 = performance.now();
  const cpu0 = server.cpuSeconds();
  const machine0 = machineCpu();
  let last = t0;
  let lastCpu = cpu0;
  let lastMachine = machine0;
  const run = duration ? { connections: c, duration } : { connections: c, amount };
  const { value: r, peakRss } = await trackPeakRss(server, () =>
    analyzeLoad(server, key, w, run).on("response", () => {
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
    wall,
  };
}

/** grpcCell runs `amount` gRPC analyses of `w` in `c` closed loops on `client`'s connection. */
export async function grpcCell(
  server: ServerProcess,
  client: GrpcClient,
  key: string,
  w: Workload,
  c: number,
  amount: number,
): Promise<Cell> {
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
    wall,
  };
}

/**
 * withCells gives `fn` a cell runner for `protocol` on `server` (a fresh gRPC connection, closed
 * afterwards), after an untimed warm-up cell of 2 requests at c=2: the first requests of a size
 * grow the allocators and the connection's flow-control windows.
 */
export async function withCells<T>(
  server: ServerProcess,
  key: string,
  w: Workload,
  protocol: Protocol,
  fn: (cell: (c: number, amount: number) => Promise<Cell>) => Promise<T>,
): Promise<T> {
  const grpc = protocol === "gRPC" ? createGrpcJsClient(server.port) : undefined;
  const cell = (c: number, amount: number) => (grpc ? grpcCell(server, grpc, key, w, c, amount) : restCell(server, key, w, c, amount));
  try {
    await cell(2, 2);
    return await fn(cell);
  } finally {
    grpc?.close();
  }
}

/** Scaling is c=2 against c=1 in paired rounds, each round running one cell of each back to back. */
export interface Scaling {
  /** Per round: [c=1 req/s, c=2 req/s]. */
  rounds: [number, number][];
  /** Sum of 200s over sum of wall time, per concurrency. */
  pooled: [number, number];
  /** CPU use over all rounds, in cores, per concurrency: the server's and this process's (the load generator). */
  serverCpu: [number, number];
  clientCpu: [number, number];
  /** Server CPU time per answered request over all rounds, ms, per concurrency. */
  cpuPerRequest: [number, number];
  /** The whole machine's idle and steal CPU over all rounds, in cores, per concurrency. */
  idle: [number, number];
  steal: [number, number];
}

/**
 * scaling runs `rounds` paired rounds of `amount[1]` requests at c=1 and `amount[2]` at c=2,
 * alternating which goes first, so that a slow drift of a shared machine hits both halves of a
 * round alike.
 */
export async function scaling(
  server: ServerProcess,
  key: string,
  w: Workload,
  protocol: Protocol,
  rounds: number,
  amount: { 1: number; 2: number },
  log: (s: string) => void,
): Promise<Scaling> {
  return withCells(server, key, w, protocol, async (cell) => {
    const zero = () => ({ ok: 0, wall: 0, server: 0, client: 0, idle: 0, steal: 0 });
    const sums = { 1: zero(), 2: zero() };
    const out: [number, number][] = [];
    for (let round = 0; round < rounds; round++) {
      const order: (1 | 2)[] = round % 2 === 0 ? [1, 2] : [2, 1];
      const rps = { 1: 0, 2: 0 };
      for (const c of order) {
        const client0 = process.cpuUsage();
        const k = await cell(c, amount[c]);
        const client = process.cpuUsage(client0);
        rps[c] = k.rps;
        sums[c].ok += k.ok;
        sums[c].wall += k.wall;
        sums[c].server += k.cpu * k.wall;
        sums[c].client += (client.user + client.system) / 1e6;
        sums[c].idle += k.machine.idle * k.wall;
        sums[c].steal += k.machine.steal * k.wall;
      }
      out.push([rps[1], rps[2]]);
      log(`${protocol} round ${round + 1}: c=1 ${rps[1].toFixed(2)} c=2 ${rps[2].toFixed(2)} req/s, ${(rps[2] / rps[1]).toFixed(2)}x`);
    }
    const per = (f: (s: ReturnType<typeof zero>) => number): [number, number] => [f(sums[1]), f(sums[2])];
    return {
      rounds: out,
      pooled: per((s) => s.ok / s.wall),
      serverCpu: per((s) => s.server / s.wall),
      clientCpu: per((s) => s.client / s.wall),
      cpuPerRequest: per((s) => (1000 * s.server) / s.ok),
      idle: per((s) => s.idle / s.wall),
      steal: per((s) => s.steal / s.wall),
    };
  });
}

/**
 * pairedFloor runs `rounds` paired rounds of the floor (analyzeImage() in this process, the server
 * idle) and one request over `protocol` at c=1 (this process idle but for the client), in
 * alternating order, so that a machine whose speed drifts within minutes moves both sides of
 * each ratio alike. Returns the ms of each side per round.
 */
export async function pairedFloor(
  server: ServerProcess,
  key: string,
  w: Workload,
  protocol: Protocol,
  engine: PipelineEngine,
  rounds: number,
  log: (s: string) => void,
): Promise<{ floor: number; request: number }[]> {
  await analyzeImage(w.bytes, engine); // warm-up, untimed
  return withCells(server, key, w, protocol, async (cell) => {
    const out: { floor: number; request: number }[] = [];
    for (let round = 0; round < rounds; round++) {
      const got = { floor: 0, request: 0 };
      for (const side of round % 2 === 0 ? (["floor", "request"] as const) : (["request", "floor"] as const)) {
        if (side === "floor") got.floor = (await analyzeImage(w.bytes, engine)).timings.total;
        else {
          const k = await cell(1, 1);
          if (k.ok !== 1) throw new Error(`${protocol} request failed: ${k.otherDetails.join("; ")}`);
          got.request = k.p50;
        }
      }
      out.push(got);
      log(`${protocol} round ${round + 1}: floor ${got.floor.toFixed(0)} request ${got.request.toFixed(0)} ms`);
    }
    return out;
  });
}
