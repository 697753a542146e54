import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { cpusAllowed, createAffinitySetter, parseCpuList } from "../../../src/inference/cpu-affinity.js";
import { DEFAULT_MODEL_PATH } from "../../../src/inference/model-session.js";
import { createWorkerPool, type WorkerPool } from "../../../src/inference/worker-pool.js";
import { spawnWorkerProcess } from "../../../src/worker-process.js";
import { makeImage } from "../../helpers/images.js";
import { isAlive as alive, schedPolicies } from "../../helpers/proc.js";
import { fixtureImage } from "./fixtures.js";

const WORKER_DATA = { modelPath: DEFAULT_MODEL_PATH, intraOpNumThreads: 1, nice: 0, schedIdle: false, sharpConcurrency: 0, pipeline: {} };
const SCHED_OTHER = 0;
const SCHED_IDLE = 5;
const hasChrt = spawnSync("chrt", ["--version"]).status === 0;

/** A worker that dies during start-up, as one that cannot load its model would. */
const failingWorker = (): ChildProcess => spawn(process.execPath, ["-e", "process.exit(3)"], { stdio: ["ignore", "ignore", "ignore", "ipc"] });

const waitFor = async (check: () => boolean, timeoutMs = 30_000) => {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 20));
  }
};

describe("inference worker pool", () => {
  let pool: WorkerPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  it("replaces a dead worker even when the first replacements fail to start", async () => {
    const spawned: ChildProcess[] = [];
    let failuresLeft = 0;
    pool = await createWorkerPool({
      size: 1,
      workerData: WORKER_DATA,
      restartDelayMs: 50,
      spawn: (url) => {
        const w = failuresLeft > 0 ? (failuresLeft--, failingWorker()) : spawnWorkerProcess(url);
        spawned.push(w);
        return w;
      },
    });
    expect(pool.idleCount()).toBe(1);
    expect(pool.pids()).toEqual([spawned[0].pid]);

    failuresLeft = 2;
    const job = pool.run(fixtureImage("crop-0"));
    spawned[0].kill("SIGKILL");
    await expect(job).rejects.toThrow(/stopped unexpectedly/);
    expect(pool.idleCount()).toBe(0);

    // two failed starts, then a good one: the pool is whole again and analyses run
    await waitFor(() => pool!.idleCount() === 1);
    expect(spawned).toHaveLength(4);
    expect(pool.pids()).toEqual([spawned[3].pid]);
    const { result } = await pool.run(fixtureImage("crop-0"));
    expect(result.model).toMatch(/^palm-lines-/);
  });

  it("stops its worker processes on close, and the caller keeps the bytes it sent", async () => {
    pool = await createWorkerPool({ size: 2, workerData: WORKER_DATA, cpus: [] });
    const pids = pool.pids();
    expect(pids).toHaveLength(2);
    const bytes = fixtureImage("crop-0");
    const copy = Buffer.from(bytes);
    await pool.run(bytes);
    expect(Buffer.compare(bytes, copy)).toBe(0);
    await pool.close();
    pool = undefined;
    expect(pids.filter(alive)).toEqual([]);
  });
});

describe("scheduling policy of the workers", () => {
  let pool: WorkerPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  it.skipIf(!hasChrt)("puts every thread of a worker under SCHED_IDLE when asked, those it starts for a job included", async () => {
    pool = await createWorkerPool({ size: 1, workerData: { ...WORKER_DATA, schedIdle: true }, cpus: [] });
    const [pid] = pool.pids();
    const before = schedPolicies(pid);
    await pool.run(fixtureImage("crop-0")); // starts libvips' threads
    const after = schedPolicies(pid);
    expect([...after.keys()].filter((tid) => !before.has(tid)).length, "threads started by the job").toBeGreaterThan(0);
    expect(new Set(after.values())).toEqual(new Set([SCHED_IDLE]));
    await pool.close();

    pool = await createWorkerPool({ size: 1, workerData: WORKER_DATA, cpus: [] });
    await pool.run(fixtureImage("crop-0"));
    expect(new Set(schedPolicies(pool.pids()[0]).values())).toEqual(new Set([SCHED_OTHER]));
  });
});

describe("CPU affinity of the workers", () => {
  it("reads the kernel's CPU lists", () => {
    expect(parseCpuList("0")).toEqual([0]);
    expect(parseCpuList("0-3,8,10-11\n")).toEqual([0, 1, 2, 3, 8, 10, 11]);
    expect(parseCpuList("")).toEqual([]);
    expect(parseCpuList("3-1")).toEqual([]);
    expect(parseCpuList("0-1,x")).toEqual([]);
  });

  const cpus = cpusAllowed().slice(0, 2);
  const setter = createAffinitySetter();
  const canPin = cpus.length === 2 && setter.available;
  setter.close();

  // Linux with taskset and 2 CPUs (CI's machine): skipped only where pinning cannot happen at all.
  it.skipIf(!canPin)("gives each worker a core of its own while all cores are busy, and frees them after", async () => {
    const pool = await createWorkerPool({ size: 2, workerData: WORKER_DATA, cpus, unpinDelayMs: 100 });
    try {
      const [a, b] = pool.pids();
      const allowed = (pid: number) => cpusAllowed(pid).join(",");
      expect([allowed(a), allowed(b)]).toEqual([cpus.join(","), cpus.join(",")]);

      // one job alone: the worker keeps every core
      const photo = await makeImage(4032, 3024, "jpeg");
      await pool.run(photo);
      expect([allowed(a), allowed(b)]).toEqual([cpus.join(","), cpus.join(",")]);

      // two at once: one core each, while they run
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

      // and every core again once the pool is no longer full
      await waitFor(() => allowed(a) === cpus.join(",") && allowed(b) === cpus.join(","), 5000);
    } finally {
      await pool.close();
    }
  });
});
