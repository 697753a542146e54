/**
 * A real redis-server per test file, on a free port, without persistence unless asked for.
 * stop() and start() let a test take Redis away and bring it back on the same port.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { freePort, waitForPort } from "./ports.js";

/** RedisProcess is a running (or stopped) redis-server. */
export interface RedisProcess {
  readonly port: number;
  /** The redis-server's process id while it runs (the bench pins it to CPUs). */
  readonly pid: number | undefined;
  readonly url: string;
  /** stop kills the server (SIGKILL: an outage, not a clean shutdown). */
  stop(): Promise<void>;
  /** start (re)starts it on the same port. */
  start(): Promise<void>;
  /** pause freezes the server (SIGSTOP): connections stay open, commands hang. */
  pause(): void;
  /** resume unfreezes it (SIGCONT); the commands sent meanwhile then run. */
  resume(): void;
  /** remove deletes the data folder of a durable server (call after the last stop()). */
  remove(): void;
}

/** StartRedisOptions configure {@link startRedis}. */
export interface StartRedisOptions {
  /**
   * durable: write every command to an append-only file in a temporary folder (fsync always), so
   * that a restart after stop() (SIGKILL) finds every counter as it was. Default false: no
   * persistence, a restarted server is empty.
   */
  durable?: boolean;
}

/** startRedis spawns `redis-server --port P --save ""`, without persistence unless `durable`. */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisProcess> {
  const port = await freePort();
  const dir = options.durable ? mkdtempSync(join(tmpdir(), "palm-redis-")) : undefined;
  const persistence = dir ? ["--dir", dir, "--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"];
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", ...persistence], {
      stdio: "ignore",
    });
    child.once("error", (e) => {
      throw new Error(`cannot start redis-server (is it installed? see README): ${e.message}`);
    });
    await waitForPort(port, 5000);
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      c.once("exit", () => resolve());
      c.kill("SIGKILL");
    });
  };
  await start();
  return {
    port,
    get pid() {
      return child?.pid;
    },
    url: `redis://127.0.0.1:${port}`,
    stop,
    start,
    pause: () => void child?.kill("SIGSTOP"),
    resume: () => void child?.kill("SIGCONT"),
    remove: () => {
      if (dir) rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** uniquePrefix isolates one test's keys. */
export function uniquePrefix(): string {
  return `test:${randomBytes(4).toString("hex")}:`;
}
