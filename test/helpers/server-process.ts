/**
 * The server as a child process, started one way only, by the bench and by every test that runs
 * it as a process: {@link startServerProcess} runs the checkout's own `npm start` command
 * ({@link startCommand}), configured through its environment.
 * Where the server comes to start differently (a compiled entry point, other OS-tuning switches),
 * startCommand is the one place to change. Its memory is read from /proc: VmRSS sampled, VmHWM
 * (peak) reset per measurement through /proc/<pid>/clear_refs. The server's analysis workers are
 * its child processes: memory and CPU are summed over the server and its descendants.
 */
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { cpuSecondsOf, processTree, statusBytes, sumOver } from "./proc.js";
import { freePort } from "./ports.js";
import { UNTHROTTLED } from "./config.js";

/** UNTHROTTLED_ENV: PALM_RATE_LIMITS that no test of something else reaches (every default plan and `*`). */
const UNTHROTTLED_ENV = JSON.stringify(Object.fromEntries(["free", "starter", "pro", "*"].map((plan) => [plan, UNTHROTTLED["*"]])));

const ROOT = fileURLToPath(new URL("../..", import.meta.url));

/** ServerProcess is a running server child. */
export interface ServerProcess {
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  /**
   * memory returns the resident set size of the server and its workers, in bytes: now, and the
   * sum of each process's peak (an upper bound: the peaks need not coincide).
   */
  memory(): { rss: number; hwm: number };
  /** cpuSeconds returns the user + system CPU time the server and its live workers have used, in seconds. */
  cpuSeconds(): number;
  /** resetPeak makes every process's VmHWM start again from its current RSS (false where the kernel refuses). */
  resetPeak(): boolean;
  /** output returns what the server wrote: the last 4000 characters of its stderr, or with keepOutput all of its stdout and stderr. */
  output(): string;
  /** kill sends `signal` and returns at once (see exited). */
  kill(signal: NodeJS.Signals): void;
  /** exited resolves with the exit code (null when a signal ended the process) once it has exited. */
  readonly exited: Promise<number | null>;
  /** stop sends SIGTERM and waits for the exit code. */
  stop(): Promise<number | null>;
}

/** ServerProcessOptions tune {@link startServerProcess}. */
export interface ServerProcessOptions {
  /** Keep all of the server's stdout and stderr for output(); by default stdout is discarded (the bench's request logs). */
  keepOutput?: boolean;
}

/** ServerStartError: the server exited, or did not answer health, while starting. */
export class ServerStartError extends Error {
  constructor(
    message: string,
    /** The exit code; null when a signal ended it (SIGKILL when it never answered health). */
    readonly exitCode: number | null,
    /** What it wrote, as {@link ServerProcess.output}. */
    readonly output: string,
  ) {
    super(`${message}\n${output}`);
  }
}

async function waitForHealth(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the server exited with code ${child.exitCode}`);
    try {
      const res = await fetch(`${url}/v1/palm/health`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the server did not answer health within ${timeoutMs} ms`);
}

/**
 * startCommand reads the Node arguments and script of `npm start` from `root`'s package.json
 * (`node --initial-old-space-size=96 dist/src/main.js` → those two after `node`), so that the
 * bench runs the server exactly as `npm start` does, each checkout with its own flags.
 */
export function startCommand(root = ROOT): string[] {
  const start: string = JSON.parse(readFileSync(`${root}/package.json`, "utf8")).scripts.start;
  const [node, ...args] = start.trim().split(/\s+/);
  if (node !== "node" || args.some((a) => /["'$&|;<>]/.test(a))) throw new Error(`npm start is not a plain node command: ${start}`);
  return args;
}

const built = new Set<string>();

/**
 * buildOnce compiles `root`'s dist/ as `npm start`'s prestart does, once per checkout and bench
 * run; a checkout from before dist/ (its start runs tsx) has nothing to build.
 */
function buildOnce(root: string): void {
  if (built.has(root) || !existsSync(`${root}/scripts/build-dist.mjs`)) return;
  const r = spawnSync(process.execPath, ["scripts/build-dist.mjs"], { cwd: root, stdio: "inherit" });
  if (r.status !== 0) throw new Error(`building ${root}/dist failed`);
  built.add(root);
}

/**
 * startServerProcess starts the server as `npm start` does (startCommand) with `env` added to
 * this process's environment and `nodeArgs` (e.g. --cpu-prof) before the others; `root` is the
 * checkout to run (default this one). It resolves once the server answers health, and rejects
 * with {@link ServerStartError} when it exits before.
 */
export async function startServerProcess(
  env: Record<string, string>,
  nodeArgs: readonly string[] = [],
  root = ROOT,
  { keepOutput = false }: ServerProcessOptions = {},
): Promise<ServerProcess> {
  buildOnce(root);
  const port = await freePort();
  const child = spawn(process.execPath, [...nodeArgs, ...startCommand(root)], {
    cwd: root,
    env: { ...process.env, REDIS_URL: "", PORT: String(port), HOST: "127.0.0.1", PALM_RATE_LIMITS: UNTHROTTLED_ENV, ...env },
    stdio: ["ignore", keepOutput ? "pipe" : "ignore", "pipe"],
  });
  let output = "";
  const keep = (d: Buffer) => (output = keepOutput ? output + d : (output + d).slice(-4000));
  child.stdout?.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  // 'close' comes once the output is read, but waits for worker processes that inherited the pipes too.
  const outputRead = new Promise<void>((resolve) => {
    child.once("close", () => resolve());
    void exited.then(() => setTimeout(resolve, 1000).unref());
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHealth(url, child, 60_000);
  } catch (e) {
    child.kill("SIGKILL");
    const code = await exited;
    await outputRead;
    throw new ServerStartError((e as Error).message, code, output);
  }
  const pid = child.pid!;
  return {
    pid,
    port,
    url,
    memory: () => {
      const tree = processTree(pid);
      // A process that is exiting (a zombie) has no Vm lines: it counts 0, not NaN.
      return { rss: sumOver(tree, (p) => statusBytes(p, "VmRSS") || 0), hwm: sumOver(tree, (p) => statusBytes(p, "VmHWM") || 0) };
    },
    cpuSeconds: () => sumOver(processTree(pid), cpuSecondsOf),
    resetPeak() {
      try {
        for (const p of processTree(pid)) writeFileSync(`/proc/${p}/clear_refs`, "5");
        return true;
      } catch {
        return false;
      }
    },
    output: () => output,
    kill: (signal) => void child.kill(signal),
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/**
 * trackPeakRss runs `fn` while sampling the server's VmRSS every 50 ms; the peak is the larger
 * of the samples and VmHWM (reset before `fn`), so short spikes between samples are counted.
 * Also returns the server's CPU use during `fn`, in cores (1.0 = one core busy all along).
 */
export async function trackPeakRss<T>(
  server: ServerProcess,
  fn: () => Promise<T>,
): Promise<{ value: T; peakRss: number; cpuCores: number }> {
  const hwmReset = server.resetPeak();
  const cpu0 = server.cpuSeconds();
  const t0 = performance.now();
  let peak = server.memory().rss;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, server.memory().rss);
    } catch {
      // the process is gone; the caller will see why
    }
  }, 50);
  try {
    const value = await fn();
    const { rss, hwm } = server.memory();
    peak = Math.max(peak, rss, hwReset(hwmReset, hwm));
    const cpuCores = (server.cpuSeconds() - cpu0) / ((performance.now() - t0) / 1000);
    return { value, peakRss: peak, cpuCores };
  } finally {
    clearInterval(timer);
  }
}

function hwReset(wasReset: boolean, hwm: number): number {
  return wasReset ? hwm : 0; // without a reset VmHWM is the lifetime peak, not this run's
}
