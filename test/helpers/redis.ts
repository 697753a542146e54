/**
 * A real redis-server per test file, on a free port, without persistence unless asked for.
 * stop() and start() let a test take Redis away and bring it back on the same port.
 */
import type { ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { freePort } from "./ports.js";
import { kill, onNewPorts, spawnServer, waitServing } from "./redis-node.js";

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

/**
 * startRedis spawns `redis-server --port P --save ""`, without persistence unless `durable`. A free port
 * can be taken before the server binds it (a test may start several servers at once, and other processes
 * take ports too), so a first start whose server exits or does not answer as itself tries again on a new
 * port, up to three times; start() after stop() keeps the port.
 */
export async function startRedis(options: StartRedisOptions = {}): Promise<RedisProcess> {
  const dir = options.durable ? mkdtempSync(join(tmpdir(), "palm-redis-")) : undefined;
  const persistence = dir ? ["--dir", dir, "--appendonly", "yes", "--appendfsync", "always"] : ["--appendonly", "no"];
  let port = 0;
  let child: ChildProcess | undefined;
  const start = async () => {
    const c = spawnServer(["--port", String(port), "--bind", "127.0.0.1", "--save", "", ...persistence]);
    child = c;
    try {
      await waitServing(port, c, 5000);
    } catch (e) {
      await kill(c);
      child = undefined;
      throw e;
    }
  };
  const stop = async () => {
    const c = child;
    child = undefined;
    await kill(c);
  };
  await onNewPorts(async () => {
    port = await freePort();
    await start();
  });
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
