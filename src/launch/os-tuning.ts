/**
 * OS tuning, applied by the launcher (main.ts) behind one switch, PALM_OS_TUNING (off by
 * default): it keeps the server's event loop ahead of the number crunching on a machine whose
 * cores the analyses fill. The pool and the server know nothing of it; the pool only reports its
 * workers ({@link WorkerPoolObserver}). What each part buys and where it hurts, with the
 * measurements: docs/decisions/os-tuning.md. Tested in test/unit/launch/os-tuning.spec.ts.
 *
 * - Threads of the server started after start-up (REST codec workers, libvips, onnxruntime)
 *   get nice {@link TUNED_NICE}; those alive at start-up (the event loop, Node's own) keep 0.
 * - Every thread of each analysis worker process gets nice {@link TUNED_NICE} and SCHED_IDLE.
 * - While every CPU runs an analysis, each worker process is pinned to a CPU of its own.
 */
import type { PoolWorker, WorkerPoolObserver } from "../inference/worker-pool.js";
import { createWorkerPinning, type WorkerPinning } from "./cpu-pinning.js";
import { cpusAllowed, createSchedulerShell, type SchedulerShell } from "./scheduler-shell.js";
import { lowerThreadPriorities, startThreadPriority, type ThreadPriority } from "./thread-priority.js";

/** TUNED_NICE is the nice value of every thread but the server's own at start-up. */
export const TUNED_NICE = 10;

/** OsTuning is the launcher's handle on the tuning. */
export interface OsTuning {
  /** Whether the tuning is on. */
  readonly enabled: boolean;
  /** The observer to give the analyzer's worker pool (a no-op when off). */
  readonly workers: WorkerPoolObserver;
  /** sweep lowers the server's threads started since {@link startOsTuning} now (it also runs every 500 ms). */
  sweep(): number;
  /** stop ends the sweep, any pending unpinning and the helper shell (resolves once it has exited). */
  stop(): Promise<void>;
}

/** OsTuningOptions are for tests; the defaults are the production values. */
export interface OsTuningOptions {
  /** CPUs to pin busy workers to. Default: the CPUs this process may run on. */
  cpus?: readonly number[];
  /** How long the workers stay pinned after fewer than `cpus.length` are busy, ms. Default 250. */
  unpinDelayMs?: number;
  /** Default {@link createSchedulerShell}. */
  shell?: SchedulerShell;
}

const OFF: OsTuning = { enabled: false, workers: {}, sweep: () => 0, stop: async () => {} };

/**
 * startOsTuning snapshots the server's threads alive now (call it before the analyzer and the
 * server start) and returns the tuning; `enabled` false returns a handle that does nothing.
 */
export function startOsTuning(enabled: boolean, options: OsTuningOptions = {}): OsTuning {
  if (!enabled) return OFF;
  const priority: ThreadPriority = startThreadPriority(TUNED_NICE);
  const shell = options.shell ?? createSchedulerShell();
  const pinning: WorkerPinning = createWorkerPinning({
    cpus: options.cpus ?? cpusAllowed(),
    pin: (pid, cpus) => shell.pin(pid, cpus),
    unpinDelayMs: options.unpinDelayMs,
  });
  /** Workers seen ready: each is deprioritised once at its start and once when ready. */
  const seen = new Set<number>();
  const deprioritise = (pid: number) => {
    lowerThreadPriorities(TUNED_NICE, new Set(), pid);
    shell.idle(pid);
  };
  return {
    enabled: true,
    workers: {
      // At once after the fork: every thread the worker starts from now on inherits both.
      started: deprioritise,
      // Again when ready, for threads that started while the first pass ran.
      changed(workers: readonly PoolWorker[]) {
        const live = new Set<number>();
        for (const w of workers) {
          live.add(w.pid);
          if (!seen.has(w.pid)) {
            seen.add(w.pid);
            deprioritise(w.pid);
          }
        }
        for (const pid of seen) if (!live.has(pid)) seen.delete(pid);
        pinning.update(workers);
      },
    },
    sweep: () => priority.sweep(),
    async stop() {
      priority.stop();
      pinning.close();
      await shell.close();
    },
  };
}
