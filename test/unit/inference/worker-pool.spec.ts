import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_MODEL_PATH } from "../../../src/inference/model-session.js";
import { createWorkerPool, type WorkerPool } from "../../../src/inference/worker-pool.js";
import { spawnWorkerProcess } from "../../../src/workers/worker-process.js";
import { isAlive as alive } from "../../helpers/proc.js";
import { fixtureImage } from "./fixtures.js";

const WORKER_DATA = { modelPath: DEFAULT_MODEL_PATH, intraOpNumThreads: 1, sharpConcurrency: 0, pipeline: {} };

/** A worker that dies during start-up, as one that cannot load its model would. */
const failingWorker = (): ChildProcess =>
  spawn(process.execPath, ["-e", "process.exit(3)"], { stdio: ["ignore", "ignore", "ignore", "ipc"] });

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
    pool = await createWorkerPool({ size: 2, workerData: WORKER_DATA });
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
