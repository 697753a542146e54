/**
 * A real redis-server per test file, on a free port, without persistence. stop() and start()
 * let a test take Redis away and bring it back on the same port.
 */
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { randomBytes } from "node:crypto";

/** RedisProcess is a running (or stopped) redis-server. */
export interface RedisProcess {
  readonly port: number;
  readonly url: string;
  /** stop kills the server (SIGKILL: an outage, not a clean shutdown). */
  stop(): Promise<void>;
  /** start (re)starts it on the same port. */
  start(): Promise<void>;
  /** pause freezes the server (SIGSTOP): connections stay open, commands hang. */
  pause(): void;
  /** resume unfreezes it (SIGCONT); the commands sent meanwhile then run. */
  resume(): void;
}

/** freePort asks the OS for a free TCP port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const c = net.connect(port, "127.0.0.1");
      c.once("connect", () => {
        c.end();
        resolve();
      });
      c.once("error", () => {
        c.destroy();
        if (Date.now() > deadline) reject(new Error(`redis-server did not listen on ${port}`));
        else setTimeout(attempt, 25);
      });
    };
    attempt();
  });
}

/** startRedis spawns `redis-server --port P --save "" --appendonly no`. */
export async function startRedis(): Promise<RedisProcess> {
  const port = await freePort();
  let child: ChildProcess | undefined;
  const start = async () => {
    child = spawn("redis-server", ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
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
    url: `redis://127.0.0.1:${port}`,
    stop,
    start,
    pause: () => void child?.kill("SIGSTOP"),
    resume: () => void child?.kill("SIGCONT"),
  };
}

/** uniquePrefix isolates one test's keys. */
export function uniquePrefix(): string {
  return `test:${randomBytes(4).toString("hex")}:`;
}
