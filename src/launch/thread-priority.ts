/**
 * Nice values of threads (Linux: each thread has its own). Used by ./os-tuning.ts only: the
 * server's threads started after start-up, and every thread of an analysis worker process, get
 * a lower priority than the server's event loop. Best effort: a no-op where /proc is missing.
 */
import { readdirSync } from "node:fs";
import os from "node:os";

/** ThreadPriority lowers the priority of this process's new threads until stopped. */
export interface ThreadPriority {
  /** sweep gives every thread started after start-up the target nice value (if it has a lower one); returns how many it changed. */
  sweep(): number;
  stop(): void;
}

/** threadIds lists the threads of process `pid`; only the process itself where /proc is missing. */
function threadIds(pid: number | "self"): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).map(Number).filter(Number.isInteger);
  } catch {
    return pid === "self" ? [process.pid] : [pid];
  }
}

/**
 * lowerThreadPriorities gives every thread of process `pid` (default this one) alive now, but
 * those in `spared`, the nice value `nice` where it has a lower one; returns how many it changed.
 * Threads started later inherit the value of the thread that starts them.
 */
export function lowerThreadPriorities(nice: number, spared: ReadonlySet<number> = new Set(), pid: number | "self" = "self"): number {
  if (nice <= 0) return 0;
  let changed = 0;
  for (const tid of threadIds(pid)) {
    if (spared.has(tid)) continue;
    try {
      if (os.getPriority(tid) < nice) {
        os.setPriority(tid, nice);
        changed++;
      }
    } catch {
      // the thread ended meanwhile, or lowering is not allowed here
    }
  }
  return changed;
}

/**
 * startThreadPriority snapshots this process's threads alive now (they keep their priority:
 * the main thread and Node's own), then every `intervalMs` gives each newer thread the nice
 * value `nice` (1-19; 0 returns a no-op). Threads are not told when others start, hence the sweep
 * (test/unit/launch/thread-priority.spec.ts).
 */
export function startThreadPriority(nice: number, intervalMs = 500): ThreadPriority {
  const spared = new Set(threadIds("self"));
  spared.add(process.pid);
  const sweep = () => lowerThreadPriorities(nice, spared);
  const timer = nice > 0 ? setInterval(sweep, intervalMs) : undefined;
  timer?.unref();
  return { sweep, stop: () => clearInterval(timer) };
}
