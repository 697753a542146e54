/**
 * Scheduling other processes from the server (Linux, util-linux): `taskset -a -p` sets the CPU
 * affinity and `chrt --idle --all-tasks` the SCHED_IDLE policy of every thread of a process;
 * threads started later inherit both. Node has no call for either. The commands run in a small
 * long-lived `sh` fed on its stdin: starting a process from the server itself copies the server's
 * page tables, about 18 ms of blocked event loop per call at 400 MB RSS (docs/decisions/os-tuning.md),
 * while the shell's own fork is cheap. Where a tool or /proc is missing, that part does nothing.
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

/** SchedulerShell sets the affinity and policy of other processes, asynchronously and best effort. */
export interface SchedulerShell {
  /** Whether CPU affinity can be set here (Linux with taskset). */
  readonly canPin: boolean;
  /** Whether SCHED_IDLE can be set here (Linux with chrt). */
  readonly canIdle: boolean;
  /** pin confines every thread of process `pid` to `cpus`. */
  pin(pid: number, cpus: readonly number[]): void;
  /** idle puts every thread of process `pid` under SCHED_IDLE. */
  idle(pid: number): void;
  /** close ends the shell once the commands sent are done, and resolves when it has exited (at most 2 s). */
  close(): Promise<void>;
}

const NONE: SchedulerShell = { canPin: false, canIdle: false, pin() {}, idle() {}, close: async () => {} };

function runs(command: string, args: string[]): boolean {
  return spawnSync(command, args, { stdio: "ignore", timeout: 5000 }).status === 0;
}

/** createSchedulerShell starts the helper shell, or returns a no-op one where neither tool runs. */
export function createSchedulerShell(): SchedulerShell {
  if (process.platform !== "linux") return NONE;
  const canPin = runs("taskset", ["-p", String(process.pid)]);
  const canIdle = runs("chrt", ["-p", String(process.pid)]);
  if (!canPin && !canIdle) return NONE;
  const child: ChildProcess = spawn("sh", [], { stdio: ["pipe", "ignore", "ignore"] });
  let shell: ChildProcess | undefined = child;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const stop = () => {
    shell = undefined;
  };
  shell.on("error", stop);
  shell.on("exit", stop);
  shell.stdin!.on("error", stop);
  // The helper never keeps the server alive; it ends with the server (its stdin closes).
  shell.unref();
  (shell.stdin as unknown as { unref?: () => void }).unref?.();
  const validPid = (pid: number) => Number.isInteger(pid) && pid > 0;
  return {
    canPin,
    canIdle,
    pin(pid, cpus) {
      if (!shell || !canPin || !validPid(pid) || cpus.length === 0 || !cpus.every((c) => Number.isInteger(c) && c >= 0)) return;
      shell.stdin!.write(`taskset -a -p -c ${cpus.join(",")} ${pid} >/dev/null 2>&1\n`);
    },
    idle(pid) {
      if (!shell || !canIdle || !validPid(pid)) return;
      shell.stdin!.write(`chrt --idle --all-tasks --pid 0 ${pid} >/dev/null 2>&1\n`);
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      // Waited for, so that a server that stopped leaves no helper behind (test/integration/shutdown.spec.ts).
      child.ref();
      child.stdin?.end();
      stop();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([exited, new Promise((r) => (timer = setTimeout(r, 2000)))]);
      clearTimeout(timer);
    },
  };
}
