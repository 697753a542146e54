/**
 * CPU pinning of the analysis worker processes while every CPU runs an analysis: each worker is
 * confined to a CPU of its own (worker in slot i to CPU i mod n), and 250 ms after fewer analyses
 * than CPUs run, every worker may use every CPU again, so a lone analysis keeps the other cores
 * for its helper threads. Why, with the numbers: docs/decisions/os-tuning.md; pinned by
 * test/unit/launch/os-tuning.spec.ts.
 */
import type { PoolWorker } from "../inference/worker-pool.js";

/** WorkerPinning follows the pool's workers and pins or frees them. */
export interface WorkerPinning {
  /** update takes the pool's live workers after any change. */
  update(workers: readonly PoolWorker[]): void;
  close(): void;
}

/**
 * createWorkerPinning pins through `pin` (pid, CPUs) over `cpus`; with fewer than 2 CPUs it
 * never pins.
 */
export function createWorkerPinning(options: {
  cpus: readonly number[];
  pin: (pid: number, cpus: readonly number[]) => void;
  unpinDelayMs?: number;
}): WorkerPinning {
  const { cpus, pin } = options;
  /** The workers pinned now, by pid: a replacement that starts while pinned is pinned too. */
  const pinned = new Set<number>();
  let pinning = false;
  let unpinTimer: NodeJS.Timeout | undefined;
  let last: readonly PoolWorker[] = [];
  let closed = false;

  function unpinAll(): void {
    unpinTimer = undefined;
    pinning = false;
    for (const w of last) if (pinned.has(w.pid)) pin(w.pid, cpus);
    pinned.clear();
  }

  return {
    update(workers) {
      if (closed || cpus.length < 2) return;
      last = workers;
      const busy = workers.filter((w) => w.busy).length;
      if (busy >= cpus.length) {
        clearTimeout(unpinTimer);
        unpinTimer = undefined;
        pinning = true;
      } else if (pinning && !unpinTimer) {
        unpinTimer = setTimeout(unpinAll, options.unpinDelayMs ?? 250);
        unpinTimer.unref();
      }
      const live = new Set(workers.map((w) => w.pid));
      for (const pid of pinned) if (!live.has(pid)) pinned.delete(pid);
      if (!pinning) return;
      for (const w of workers) {
        if (pinned.has(w.pid)) continue;
        pinned.add(w.pid);
        pin(w.pid, [cpus[w.slot % cpus.length]]);
      }
    },
    close() {
      closed = true;
      clearTimeout(unpinTimer);
    },
  };
}
