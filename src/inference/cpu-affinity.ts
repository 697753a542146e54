/**
 * CPU affinity of the analysis worker processes (Linux). When every core runs an analysis, each
 * worker process is confined to a core of its own: an analysis hands work back and forth between
 * its threads (event loop, libuv pool, libvips workers) about a thousand times, and a thread woken
 * on a core the other analysis holds waits there while its own core idles. One core per process
 * removes that wait (measured: +11-13% throughput at c=2 on 2 cores, bench/RESULTS.md). With fewer
 * analyses than cores the workers are free again, so one analysis alone still spreads its threads
 * over the idle cores (pinned, a lone analysis is about 10% slower).
 *
 * Node has no call for sched_setaffinity; `taskset -a -p` (util-linux) does it for every thread of
 * a process. It runs from a small long-lived `sh` fed on its stdin: starting a process from the
 * server itself would copy the server's page tables, about 18 ms of blocked event loop per call at
 * 400 MB RSS, while the shell's own fork is cheap. Where taskset or /proc is missing, nothing is
 * pinned and the workers run as before.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";

/** parseCpuList reads a kernel CPU list such as "0-3,8,10-11". Returns [] for anything else. */
export function parseCpuList(list: string): number[] {
  const cpus: number[] = [];
  for (const part of list.trim().split(",")) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) return [];
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    if (to < from || to - from > 4096) return [];
    for (let c = from; c <= to; c++) cpus.push(c);
  }
  return cpus;
}

/** cpusAllowed is the list of CPUs process `pid` (default: this one) may run on; [] where /proc does not tell. */
export function cpusAllowed(pid: number | "self" = "self"): number[] {
  try {
    const m = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? parseCpuList(m[1]) : [];
  } catch {
    return [];
  }
}

/** AffinitySetter confines processes to CPUs, asynchronously and best effort. */
export interface AffinitySetter {
  /** Whether affinity can be set here (Linux with taskset). */
  readonly available: boolean;
  /** set confines every thread of process `pid` to `cpus` (threads it starts later inherit it). */
  set(pid: number, cpus: readonly number[]): void;
  close(): void;
}

const NONE: AffinitySetter = { available: false, set() {}, close() {} };

/** createAffinitySetter starts the helper shell, or returns a no-op setter where taskset cannot run. */
export function createAffinitySetter(): AffinitySetter {
  if (process.platform !== "linux") return NONE;
  const probe = spawnSync("taskset", ["-p", String(process.pid)], { stdio: "ignore", timeout: 5000 });
  if (probe.status !== 0) return NONE;
  let shell: ChildProcess | undefined = spawn("sh", [], { stdio: ["pipe", "ignore", "ignore"] });
  const stop = () => {
    shell = undefined;
  };
  shell.on("error", stop);
  shell.on("exit", stop);
  shell.stdin!.on("error", stop);
  // The helper never keeps the server alive; it ends with the server (its stdin closes).
  shell.unref();
  (shell.stdin as unknown as { unref?: () => void }).unref?.();
  return {
    available: true,
    set(pid, cpus) {
      if (!shell || !Number.isInteger(pid) || pid <= 0 || cpus.length === 0 || !cpus.every((c) => Number.isInteger(c) && c >= 0)) return;
      shell.stdin!.write(`taskset -a -p -c ${cpus.join(",")} ${pid} >/dev/null 2>&1\n`);
    },
    close() {
      shell?.stdin?.end();
      stop();
    },
  };
}
