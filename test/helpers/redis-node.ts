/**
 * What the single redis-server (redis.ts) and the cluster (redis-cluster.ts) share: spawning and ending
 * a server, calling redis-cli with a time limit, waiting until the server that answers on a port is the
 * child just spawned (a free port can be taken before the child binds it, by another server or process),
 * and starting again on new ports when it is not.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { promisify } from "node:util";

const run = promisify(execFile);

/** exited says whether `child` has ended, by its own exit or by a signal. */
export const exited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null;

/** kill ends `child` with SIGKILL (an outage, not a clean shutdown) and resolves once it has exited. */
export function kill(child: ChildProcess | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    if (!child || child.pid === undefined || exited(child)) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });
}

/** cli runs redis-cli against 127.0.0.1:`port`; a call that hangs (the port held by something that is not Redis) fails after 2 s. */
export const cli = async (port: number, ...args: string[]) =>
  (await run("redis-cli", ["-h", "127.0.0.1", "-p", String(port), ...args], { timeout: 2000 })).stdout;

/** NodeNotUp: the child exited before it answered (its port taken), which ends a wait at once. */
export class NodeNotUp extends Error {}

/** NotInstalled: redis-server could not be spawned at all; another port would not help. */
export class NotInstalled extends NodeNotUp {}

const spawnErrors = new WeakMap<ChildProcess, Error>();

/** spawnServer spawns `redis-server ...args`; a binary that cannot be run surfaces from waitServing as NotInstalled. */
export function spawnServer(args: readonly string[]): ChildProcess {
  const child = spawn("redis-server", args, { stdio: "ignore" });
  child.once("error", (e) => spawnErrors.set(child, e));
  return child;
}

/**
 * onNewPorts runs `attempt` (which takes new free ports each time) up to three times: a port can be taken
 * before its server binds it, and a loaded machine can be slow to answer. NotInstalled ends it at once.
 */
export async function onNewPorts<T>(attempt: () => Promise<T>): Promise<T> {
  for (let round = 1; ; round++) {
    try {
      return await attempt();
    } catch (e) {
      if (round === 3 || e instanceof NotInstalled) throw e;
    }
  }
}

/** waitFor polls `check` until it holds; a NodeNotUp it throws ends the wait at once. */
export async function waitFor(what: string, timeoutMs: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await check().catch((e) => {
      if (e instanceof NodeNotUp) throw e;
      return false;
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`redis: ${what} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * waitServing resolves once the redis-server answering on `port` reports `child`'s own process id
 * (INFO server), and throws NodeNotUp as soon as `child` exits (NotInstalled if it could not be spawned):
 * a PONG alone may come from another process holding the port the child failed to bind. Pinned by
 * redis-helpers.spec.
 */
export function waitServing(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  return waitFor(`node ${port} not answering`, timeoutMs, async () => {
    const missing = spawnErrors.get(child);
    if (missing) throw new NotInstalled(`cannot start redis-server (is it installed? see README): ${missing.message}`);
    if (exited(child)) throw new NodeNotUp(`redis: the server for port ${port} exited (port taken?)`);
    const pid = /^process_id:(\d+)\s*$/m.exec(await cli(port, "info", "server"))?.[1];
    return pid === String(child.pid);
  });
}
