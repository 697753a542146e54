/**
 * Two server configurations side by side in one run: A and B each a checkout (a `git worktree`
 * with node_modules; default this one) plus an environment, both started and idle but for the one
 * being measured, measured in alternating rounds so that a drift of the shared machine hits both
 * alike. Throughput (req/s at c=1 and c=2 over gRPC and REST) and health under saturation.
 */
import { PalmService } from "../gen/palm/v1/palm_pb.js";
import { callUnary, createGrpcJsClient, startServerProcess, type ServerProcess } from "../test/helpers/index.js";
import { saturatedHealth, warmUp } from "./health-probe.js";
import { median, quantile } from "./stats.js";
import type { Workload } from "./workloads.js";

/** SideSpec is one side of an A/B comparison. */
export interface SideSpec {
  /** Checkout to start the server from; undefined: this one. */
  dir?: string;
  env: Record<string, string>;
}

export const describeSide = (s: SideSpec) =>
  [s.dir ? `checkout ${s.dir}` : "this checkout", ...Object.entries(s.env).map(([k, v]) => `${k}=${v}`)].join(", ");

async function startSides(specs: [SideSpec, SideSpec], baseEnv: Record<string, string>): Promise<ServerProcess[]> {
  const servers: ServerProcess[] = [];
  try {
    for (const s of specs) servers.push(await startServerProcess({ ...baseEnv, ...s.env }, [], s.dir));
  } catch (e) {
    for (const s of servers) await s.stop();
    throw e;
  }
  return servers;
}

/** AbThroughput is each side's req/s per cell and round. */
export interface AbThroughput {
  /** "gRPC c=1" → [A per round, B per round]. */
  cells: Map<string, [number[], number[]]>;
}

const CELLS = [
  ["gRPC", 1],
  ["gRPC", 2],
  ["REST", 1],
  ["REST", 2],
] as const;

/**
 * abThroughput: in each round, in a rotating order, each side gets `w` over gRPC and REST at c=1
 * and c=2, `perLoop` requests per closed loop (from bench/ab-servers.ts).
 */
export async function abThroughput(
  specs: [SideSpec, SideSpec],
  baseEnv: Record<string, string>,
  key: string,
  w: Workload,
  rounds: number,
  perLoop: number,
  log: (s: string) => void,
): Promise<AbThroughput> {
  const servers = await startSides(specs, baseEnv);
  const clients = servers.map((s) => createGrpcJsClient(s.port));
  const body = JSON.stringify({ image: w.bytes.toString("base64") });
  const one = async (i: number, protocol: "gRPC" | "REST") => {
    if (protocol === "gRPC") {
      const r = await callUnary(clients[i], PalmService.method.analyze, { image: w.bytes }, { "x-api-key": key });
      if (r.error) throw new Error(`side ${"AB"[i]} gRPC: ${r.error.code} ${r.error.details}`);
    } else {
      const res = await fetch(`${servers[i].url}/v1/palm/analyze`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key },
        body,
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`side ${"AB"[i]} REST: ${res.status}`);
    }
  };
  const cell = async (i: number, protocol: "gRPC" | "REST", c: number) => {
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: c }, async () => {
        for (let k = 0; k < perLoop; k++) await one(i, protocol);
      }),
    );
    return (c * perLoop) / ((performance.now() - t0) / 1000);
  };
  const cells = new Map<string, [number[], number[]]>(CELLS.map(([p, c]) => [`${p} c=${c}`, [[], []]]));
  try {
    for (let i = 0; i < 2; i++) for (const p of ["gRPC", "REST"] as const) await one(i, p), await one(i, p); // warm-up
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [0, 1] : [1, 0];
      for (const [p, c] of r % 4 < 2 ? CELLS : [...CELLS].reverse()) {
        for (const i of order) cells.get(`${p} c=${c}`)![i].push(await cell(i, p, c));
      }
      log(`round ${r + 1}/${rounds} done`);
    }
  } finally {
    for (const c of clients) c.close();
    for (const s of servers) await s.stop();
  }
  return { cells };
}

/** pooledRps is the rate of cells that each did the same work: the harmonic mean of their rates. */
export const pooledRps = (xs: readonly number[]) => xs.length / xs.reduce((a, x) => a + 1 / x, 0);

/** AbHealth is each side's health p99 (and max, probes, analyses/s) per round. */
export interface AbHealth {
  sides: { p99: number; max: number; probes: number; rps: number }[][];
}

/**
 * abHealth: in each round, in alternating order, each side gets 4 analyses of `w` in flight over
 * `protocol` for `seconds` while a 50 Hz probe times GET /v1/palm/health (from bench/health-ab.ts).
 */
export async function abHealth(
  specs: [SideSpec, SideSpec],
  baseEnv: Record<string, string>,
  key: string,
  w: Workload,
  protocol: "gRPC" | "REST",
  rounds: number,
  seconds: number,
  log: (s: string) => void,
): Promise<AbHealth> {
  const servers = await startSides(specs, baseEnv);
  const sides: AbHealth["sides"] = [[], []];
  try {
    for (const s of servers) await warmUp(s, key, w);
    for (let r = 0; r < rounds; r++) {
      for (const i of r % 2 === 0 ? [0, 1] : [1, 0]) {
        const { probes, rps } = await saturatedHealth(servers[i], key, w, protocol, seconds);
        sides[i].push({ p99: quantile(probes, 0.99), max: Math.max(...probes), probes: probes.length, rps });
      }
      log(`round ${r + 1}/${rounds}: p99 A ${sides[0][r].p99.toFixed(1)} ms, B ${sides[1][r].p99.toFixed(1)} ms`);
    }
  } finally {
    for (const s of servers) await s.stop();
  }
  return { sides };
}

/** medianP99 is the median over rounds of one side's p99. */
export const medianP99 = (rounds: AbHealth["sides"][number]) => median(rounds.map((x) => x.p99));
