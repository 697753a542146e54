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

/**
 * machineCpu reads the whole machine's CPU time from /proc/stat (its aggregate `cpu` line), in
 * seconds summed over the cores: idle (idle + iowait) and steal (taken by the hypervisor for other
 * guests; a shared VM's cores are not all ours even when nothing of ours is idle).
 */
export function machineCpu(): { idle: number; steal: number } {
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0];
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal ..., in USER_HZ (100) ticks
  return { idle: (f[3] + f[4]) / 100, steal: (f[7] ?? 0) / 100 };
}

/** machineCores turns two machineCpu() readings `wallS` seconds apart into cores (1.0 = one core all along). */
export function machineCores(from: ReturnType<typeof machineCpu>, to: ReturnType<typeof machineCpu>, wallS: number) {
  return { idle: (to.idle - from.idle) / wallS, steal: (to.steal - from.steal) / wallS };
}

/**
 * runNs is the time thread `tid` of process `pid` (default its main thread: a Node process's event
 * loop) has spent running on a CPU, in nanoseconds (/proc/<pid>/task/<tid>/schedstat, field 1):
 * finer than the 10 ms ticks of cpuSecondsOf, for costs of a millisecond or less.
 */
export function runNs(pid: number, tid = pid): number {
  return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0]);
}

/** processRunNs sums runNs over the live threads of process `pid` (threads that ended are not counted). */
export function processRunNs(pid: number): number {
  return sumOver(readdirSync(`/proc/${pid}/task`).map(Number), (tid) => runNs(pid, tid));
}
