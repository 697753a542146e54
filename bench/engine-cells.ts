/**
 * The engine alone, in paired rounds: an analyzer (its worker pool started by this process) fed one
 * image by 1 and then 2 closed loops, with no HTTP, JSON, base64 or load generator. The
 * engine-scaling scenario, so that the server's c=2 / c=1 ratio can be read next to what the
 * engine itself allows on the same machine.
 */
import { cpuUsage } from "node:process";
import type { EngineAnalyzer } from "../src/inference/analyzer.js";
import { cpuSecondsOf, machineCores, machineCpu, sumOver } from "../test/helpers/index.js";

/** EngineCell is one closed-loop measurement. */
export interface EngineCell {
  /** Analyses per second. */
  rps: number;
  /** This process's and its worker processes' CPU use, cores. */
  cores: number;
  /** This process's and its worker processes' CPU time per analysis, ms. */
  cpuMs: number;
  /** The whole machine's idle and steal time, cores. */
  idle: number;
  steal: number;
}

/** EngineRound is one paired round: c=1 and c=2 back to back. */
export interface EngineRound {
  c1: EngineCell;
  c2: EngineCell;
}

/** engineCell runs `loops` closed loops of `perLoop` analyses of `bytes` each. */
export async function engineCell(analyzer: EngineAnalyzer, bytes: Uint8Array, loops: number, perLoop: number): Promise<EngineCell> {
  const cpu0 = cpuUsage();
  const workers0 = sumOver(analyzer.workerPids(), cpuSecondsOf);
  const m0 = machineCpu();
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: loops }, async () => {
      for (let i = 0; i < perLoop; i++) await analyzer.analyze(new Uint8Array(bytes));
    }),
  );
  const wall = (performance.now() - t0) / 1000;
  const cpu = cpuUsage(cpu0);
  const m = machineCores(m0, machineCpu(), wall);
  const n = loops * perLoop;
  const cpuS = (cpu.user + cpu.system) / 1e6 + sumOver(analyzer.workerPids(), cpuSecondsOf) - workers0;
  return { rps: n / wall, cores: cpuS / wall, cpuMs: (1000 * cpuS) / n, idle: m.idle, steal: m.steal };
}

/**
 * engineScaling warms up with one untimed c=2 cell, then runs `rounds` paired rounds,
 * alternating which of c=1 and c=2 goes first, so that a drift of the machine hits both alike.
 */
export async function engineScaling(analyzer: EngineAnalyzer, bytes: Uint8Array, rounds: number, perLoop: number): Promise<EngineRound[]> {
  await engineCell(analyzer, bytes, 2, Math.max(1, Math.floor(perLoop / 2)));
  const out: EngineRound[] = [];
  for (let r = 0; r < rounds; r++) {
    if (r % 2 === 0) {
      const c1 = await engineCell(analyzer, bytes, 1, perLoop);
      out.push({ c1, c2: await engineCell(analyzer, bytes, 2, perLoop) });
    } else {
      const c2 = await engineCell(analyzer, bytes, 2, perLoop);
      out.push({ c1: await engineCell(analyzer, bytes, 1, perLoop), c2 });
    }
  }
  return out;
}

/**
 * pooledRatio is the c=2 / c=1 ratio of all analyses over all wall time. Every c=1 cell does
 * the same number of analyses, and every c=2 cell twice that, so it comes down to the sums of
 * the cells' seconds per analysis.
 */
export function pooledRatio(rounds: readonly EngineRound[]): number {
  const secondsPer = (k: "c1" | "c2") => rounds.reduce((s, r) => s + 1 / r[k].rps, 0);
  return secondsPer("c1") / secondsPer("c2");
}
