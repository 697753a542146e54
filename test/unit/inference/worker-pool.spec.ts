import type { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_MODEL_PATH } from "../../../src/inference/model-session.js";
import { createWorkerPool, type WorkerPool } from "../../../src/inference/worker-pool.js";
import { spawnWorker } from "../../../src/worker-thread.js";
import { fixtureImage } from "./fixtures.js";

/** A worker that dies during start-up, as one that cannot load its model would. */
const FAILING = new URL(`data:text/javascript,${encodeURIComponent('throw new Error("cannot start")')}`);

const waitFor = async (check: () => boolean, timeoutMs = 30_000) => {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error("condition not reached in time");
    await new Promise((r) => setTimeout(r, 50));
  }
};

describe("inference worker pool", () => {
  let pool: WorkerPool | undefined;
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  it("replaces a dead worker even when the first replacements fail to start", async () => {
    const spawned: Worker[] = [];
    let failuresLeft = 0;
    pool = await createWorkerPool({
      size: 1,
      workerData: { modelPath: DEFAULT_MODEL_PATH, intraOpNumThreads: 1, sharpConcurrency: 0, pipeline: {} },
      restartDelayMs: 50,
      spawn: (url, data) => {
        const w = failuresLeft > 0 ? (failuresLeft--, spawnWorker(FAILING, data)) : spawnWorker(url, data);
        spawned.push(w);
        return w;
      },
    });
    expect(pool.idleCount()).toBe(1);

    failuresLeft = 2;
    const job = pool.run(fixtureImage("crop-0"));
    await spawned[0].terminate();
    await expect(job).rejects.toThrow(/stopped unexpectedly/);
    expect(pool.idleCount()).toBe(0);

    // two failed starts, then a good one: the pool is whole again and analyses run
    await waitFor(() => pool!.idleCount() === 1);
    expect(spawned).toHaveLength(4);
    const { result } = await pool.run(fixtureImage("crop-0"));
    expect(result.model).toMatch(/^palm-lines-/);
  });
});
