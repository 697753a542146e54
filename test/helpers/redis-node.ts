/**
 * What the single redis-server (redis.ts) and the cluster (redis-cluster.ts) share: ending a child,
 * calling redis-cli with a time limit, and waiting until the server that answers on a port is the
 * child just spawned (a free port can be taken before the child binds it, by another server or process).
 */
import { execFile, type ChildProcess } from "node:child_process";
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
 * (INFO server), and throws NodeNotUp as soon as `child` exits: a PONG alone may come from another
 * process holding the port the child failed to bind. Pinned by redis-helpers.spec.
 */
export function waitServing(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  return waitFor(`node ${port} not answering`, timeoutMs, async () => {
    if (exited(child)) throw new NodeNotUp(`redis: the server for port ${port} exited (port taken?)`);
    const pid = /^process_id:(\d+)\s*$/m.exec(await cli(port, "info", "server"))?.[1];
    return pid === String(child.pid);
  });
}
