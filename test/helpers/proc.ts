/**
 * A process and its descendants read from Linux's /proc: the server's analysis workers are child
 * processes, so its memory and CPU are those of the whole tree. Shared libraries mapped by every
 * process count once per process in a sum of RSS: the sum is an upper bound of the memory used.
 */
import { readFileSync, readdirSync } from "node:fs";

function childrenOf(pid: number): number[] {
  const out: number[] = [];
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      for (const c of readFileSync(`/proc/${pid}/task/${tid}/children`, "utf8").trim().split(/\s+/)) if (c) out.push(Number(c));
    } catch {
      // the thread ended, or the kernel lacks the file
    }
  }
  return out;
}

/** processTree is `pid` and all its live descendants. */
export function processTree(pid: number): number[] {
  const all = [pid];
  for (let i = 0; i < all.length; i++) all.push(...childrenOf(all[i]));
  return all;
}

/** statusBytes reads one "Vm...: N kB" line of /proc/<pid>/status, in bytes (NaN when absent). */
export function statusBytes(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/** cpuSecondsOf is the user + system CPU time process `pid` has used, in seconds. */
export function cpuSecondsOf(pid: number): number {
  // /proc/<pid>/stat: utime and stime are fields 14 and 15, in clock ticks (USER_HZ = 100).
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * schedPolicies maps each thread of process `pid` to its scheduling policy, from
 * /proc/<pid>/task/<tid>/stat field 41: 0 SCHED_OTHER, 3 SCHED_BATCH, 5 SCHED_IDLE.
 */
export function schedPolicies(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`).map(Number)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      out.set(tid, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[38]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** isAlive tells whether process `pid` still exists (a zombie counts until it is reaped). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** sumOver adds `read(pid)` over `pids`, skipping processes that are gone. */
export function sumOver(pids: readonly number[], read: (pid: number) => number): number {
  let sum = 0;
  for (const pid of pids) {
    try {
      sum += read(pid);
    } catch {
      // exited meanwhile
    }
  }
  return sum;
}
