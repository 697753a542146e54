/**
 * Keeping the event loop ahead of the number crunching. The analysis workers, their libvips and
 * onnxruntime threads and the REST codec workers can keep every core busy; the main thread, which
 * answers health checks, accepts connections and moves bytes, then waits for a time slice behind
 * them. On Linux each thread has its own nice value: this lowers the priority of every thread
 * started after start-up (everything but the main thread and Node's own threads at that point),
 * so that under saturation the event loop gets the CPU first, while idle cores are still used
 * to the full by the workers. Best effort: a no-op where /proc/self/task is missing (not Linux).
 */
import { spawnSync } from "node:child_process";
import { readdirSync } from "node:fs";
import os from "node:os";

/** ThreadPriority lowers the priority of new threads until stopped. */
export interface ThreadPriority {
  /** sweep gives every thread started after start-up the target nice value (if it has a lower one); returns how many it changed. */
  sweep(): number;
  stop(): void;
}

/** threadIds lists this process's threads; only the main thread where /proc/self/task is missing. */
function threadIds(): number[] {
  try {
    return readdirSync("/proc/self/task").map(Number).filter(Number.isInteger);
  } catch {
    return [process.pid];
  }
}

/**
 * lowerThreadPriorities gives every thread of this process alive now, but those in `spared`, the
 * nice value `nice` where it has a lower one; returns how many it changed. Threads started later
 * inherit the value of the thread that starts them.
 */
export function lowerThreadPriorities(nice: number, spared: ReadonlySet<number> = new Set()): number {
  if (nice <= 0) return 0;
  let changed = 0;
  for (const tid of threadIds()) {
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
 * useIdleScheduling puts every thread of this process under the SCHED_IDLE policy (Linux, with
 * util-linux's `chrt`; Node has no call for it). Such threads run only when no thread of the
 * normal policy wants the core: one that wakes up takes it at once, where a nice value only
 * shrinks a thread's share and leaves the woken thread to wait for the running one's slice.
 * Threads started later inherit the policy. Returns whether it took (false where `chrt` is
 * missing or refused; the process then keeps its nice value).
 */
export function useIdleScheduling(): boolean {
  const r = spawnSync("chrt", ["--idle", "--all-tasks", "--pid", "0", String(process.pid)], { stdio: "ignore", timeout: 5000 });
  return r.status === 0;
}

/**
 * startThreadPriority snapshots the threads alive now (they keep their priority), then every
 * `intervalMs` gives each newer thread the nice value `nice` (1-19; 0 returns a no-op).
 */
export function startThreadPriority(nice: number, intervalMs = 500): ThreadPriority {
  const spared = new Set(threadIds());
  spared.add(process.pid);
  const sweep = () => lowerThreadPriorities(nice, spared);
  const timer = nice > 0 ? setInterval(sweep, intervalMs) : undefined;
  timer?.unref();
  return { sweep, stop: () => clearInterval(timer) };
}
