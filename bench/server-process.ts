/**
 * The server under test as a child process (`node --import tsx src/main.ts`, configured through
 * its environment), and its memory read from /proc: VmRSS sampled, VmHWM (peak) reset per
 * measurement through /proc/<pid>/clear_refs.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** ServerProcess is a running server child. */
export interface ServerProcess {
  readonly pid: number;
  readonly port: number;
  readonly url: string;
  /** memory returns the current and peak resident set size in bytes. */
  memory(): { rss: number; hwm: number };
  /** resetPeak makes VmHWM start again from the current RSS (false where the kernel refuses). */
  resetPeak(): boolean;
  /** stop sends SIGTERM and waits for the exit code. */
  stop(): Promise<number | null>;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

async function waitForHealth(url: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`the server exited with code ${child.exitCode}`);
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

/** statusKb reads one "Vm...: N kB" line of /proc/<pid>/status, in bytes. */
function statusBytes(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return m ? Number(m[1]) * 1024 : Number.NaN;
}

/** startServerProcess starts src/main.ts with `env` added to this process's environment. */
export async function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: ROOT,
    env: { ...process.env, REDIS_URL: "", PORT: String(port), HOST: "127.0.0.1", ...env },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  child.stderr!.on("data", (d) => (stderr = (stderr + d).slice(-4000)));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHealth(url, child, 60_000);
  } catch (e) {
    child.kill("SIGKILL");
    throw new Error(`${(e as Error).message}\n${stderr}`);
  }
  const pid = child.pid!;
  return {
    pid,
    port,
    url,
    memory: () => ({ rss: statusBytes(pid, "VmRSS"), hwm: statusBytes(pid, "VmHWM") }),
    resetPeak() {
      try {
        writeFileSync(`/proc/${pid}/clear_refs`, "5");
        return true;
      } catch {
        return false;
      }
    },
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
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
 */
export async function trackPeakRss<T>(server: ServerProcess, fn: () => Promise<T>): Promise<{ value: T; peakRss: number }> {
  const hwmReset = server.resetPeak();
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
    return { value, peakRss: peak };
  } finally {
    clearInterval(timer);
  }
}

function hwReset(wasReset: boolean, hwm: number): number {
  return wasReset ? hwm : 0; // without a reset VmHWM is the lifetime peak, not this run's
}
