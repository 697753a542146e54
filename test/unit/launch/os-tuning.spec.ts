/**
 * The launcher's OS tuning on real worker processes: SCHED_IDLE and nice 10 for every thread of
 * every worker (those a job starts included), a CPU of its own for each worker while all CPUs are
 * busy, and nothing at all with PALM_OS_TUNING=off.
 */
import os from "node:os";
import { readdirSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_MODEL_PATH } from "../../../src/inference/model-session.js";
import { createWorkerPool, type PoolWorker, type WorkerPool } from "../../../src/inference/worker-pool.js";
import { createWorkerPinning } from "../../../src/launch/cpu-pinning.js";
import { startOsTuning, TUNED_NICE, type OsTuning } from "../../../src/launch/os-tuning.js";
import { cpusAllowed, createSchedulerShell, parseCpuList } from "../../../src/launch/scheduler-shell.js";
import { makeImage } from "../../helpers/images.js";
import { schedPolicies } from "../../helpers/proc.js";
import { fixtureImage } from "../inference/fixtures.js";

const WORKER_DATA = { modelPath: DEFAULT_MODEL_PATH, intraOpNumThreads: 1, sharpConcurrency: 0, pipeline: {} };
const SCHED_OTHER = 0;
const SCHED_IDLE = 5;

const probe = createSchedulerShell();
const { canIdle, canPin } = probe;
await probe.close();

const waitFor = async (check: () => boolean, timeoutMs = 10_000) => {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 20));
  }
};

const nices = (pid: number) => readdirSync(`/proc/${pid}/task`).map((tid) => os.getPriority(Number(tid)));

describe("OS tuning of the analysis workers", () => {
  let pool: WorkerPool | undefined;
  let tuning: OsTuning | undefined;
  afterEach(async () => {
    await pool?.close();
    await tuning?.stop();
    pool = tuning = undefined;
  });

  it.skipIf(!canIdle)("puts every thread of a worker under SCHED_IDLE at nice 10, those a job starts included", async () => {
    tuning = startOsTuning(true, { cpus: [] });
    pool = await createWorkerPool({ size: 1, workerData: WORKER_DATA, observer: tuning.workers });
    const [pid] = pool.pids();
    await waitFor(() => [...schedPolicies(pid).values()].every((p) => p === SCHED_IDLE));
    const before = schedPolicies(pid);
    await pool.run(fixtureImage("crop-0")); // starts libvips' threads
    const after = schedPolicies(pid);
    expect([...after.keys()].filter((tid) => !before.has(tid)).length, "threads started by the job").toBeGreaterThan(0);
    expect(new Set(after.values())).toEqual(new Set([SCHED_IDLE]));
    expect(new Set(nices(pid))).toEqual(new Set([TUNED_NICE]));
  });

  it("does nothing when off", async () => {
    tuning = startOsTuning(false);
    expect(tuning.enabled).toBe(false);
    pool = await createWorkerPool({ size: 1, workerData: WORKER_DATA, observer: tuning.workers });
    await pool.run(fixtureImage("crop-0"));
    const [pid] = pool.pids();
    expect(new Set(schedPolicies(pid).values())).toEqual(new Set([SCHED_OTHER]));
    expect(new Set(nices(pid))).toEqual(new Set([0]));
    expect(tuning.sweep()).toBe(0);
  });

  const cpus = cpusAllowed().slice(0, 2);
  // Linux with taskset and 2 CPUs (CI's machine): skipped only where pinning cannot happen at all.
  it.skipIf(!(canPin && cpus.length === 2))(
    "gives each worker a CPU of its own while all CPUs are busy, and frees them after",
    async () => {
      tuning = startOsTuning(true, { cpus, unpinDelayMs: 100 });
      pool = await createWorkerPool({ size: 2, workerData: WORKER_DATA, observer: tuning.workers });
      const [a, b] = pool.pids();
      const allowed = (pid: number) => cpusAllowed(pid).join(",");
      expect([allowed(a), allowed(b)]).toEqual([cpus.join(","), cpus.join(",")]);

      // one job alone: the worker keeps every CPU
      const photo = await makeImage(4032, 3024, "jpeg");
      await pool.run(photo);
      expect([allowed(a), allowed(b)]).toEqual([cpus.join(","), cpus.join(",")]);

      // two at once: one CPU each, while they run
      const seen = new Set<string>();
      const jobs = Promise.all([pool.run(photo), pool.run(photo)]);
      let done = false;
      void jobs.finally(() => (done = true));
      while (!done) {
        seen.add(`${allowed(a)}|${allowed(b)}`);
        await new Promise((r) => setTimeout(r, 10));
      }
      await jobs;
      expect(seen).toContain(`${cpus[0]}|${cpus[1]}`);

      // and every CPU again once the pool is no longer full
      await waitFor(() => allowed(a) === cpus.join(",") && allowed(b) === cpus.join(","), 5000);
    },
  );
});

describe("CPU pinning policy", () => {
  const worker = (slot: number, pid: number, busy: boolean): PoolWorker => ({ slot, pid, busy });

  it("pins every worker while all CPUs are busy, a replacement too, and frees them after the delay", async () => {
    const calls: string[] = [];
    const pinning = createWorkerPinning({ cpus: [4, 7], pin: (pid, c) => calls.push(`${pid}:${c.join(",")}`), unpinDelayMs: 30 });
    pinning.update([worker(0, 10, true), worker(1, 11, false)]);
    expect(calls).toEqual([]);
    pinning.update([worker(0, 10, true), worker(1, 11, true)]);
    expect(calls).toEqual(["10:4", "11:7"]);
    pinning.update([worker(0, 10, true)]); // 11 died
    pinning.update([worker(0, 10, true), worker(1, 12, false)]); // its replacement, still within the delay
    expect(calls).toEqual(["10:4", "11:7", "12:7"]);
    await new Promise((r) => setTimeout(r, 60));
    expect(calls.slice(3).sort()).toEqual(["10:4,7", "12:4,7"]);
    pinning.close();
  });

  it("never pins with fewer than 2 CPUs", () => {
    const calls: number[] = [];
    const pinning = createWorkerPinning({ cpus: [0], pin: (pid) => calls.push(pid) });
    pinning.update([worker(0, 10, true)]);
    expect(calls).toEqual([]);
  });

  it("reads the kernel's CPU lists", () => {
    expect(parseCpuList("0")).toEqual([0]);
    expect(parseCpuList("0-3,8,10-11\n")).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(parseCpuList("")).toEqual([]);
    expect(parseCpuList("3-1")).toEqual([]);
    expect(parseCpuList("0-1,x")).toEqual([]);
  });
});
