/**
 * A real three-node Redis Cluster per test file: three cluster-enabled redis-servers on free
 * loopback ports, joined by `redis-cli --cluster create` (no replicas), ready once every node
 * reports cluster_state:ok. Without persistence; the nodes' cluster files live in a temporary
 * folder removed by stop().
 */
import { execFile, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { freePort } from "./ports.js";
import { cli, kill, onNewPorts, spawnServer, waitFor, waitServing } from "./redis-node.js";

const run = promisify(execFile);

/** RedisClusterProcess is a running three-master Redis Cluster. */
export interface RedisClusterProcess {
  /** The nodes' ports (clients use 127.0.0.1). */
  readonly ports: readonly number[];
  /** The value of REDIS_CLUSTER_NODES naming every node: `127.0.0.1:A,127.0.0.1:B,127.0.0.1:C`. */
  readonly nodes: string;
  /** killNode kills the node of `ports[index]` (SIGKILL: an outage; it is not restarted). */
  killNode(index: number): Promise<void>;
  /** stop kills every node (SIGKILL) and removes the cluster files. */
  stop(): Promise<void>;
}

/** distinctFreePorts asks the OS for `n` free ports, all different. */
async function distinctFreePorts(n: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < n) ports.add(await freePort());
  return [...ports];
}

/**
 * startRedisCluster starts three cluster-enabled redis-servers and joins them as a cluster of
 * three masters covering all 16384 slots. The bus ports are chosen free as well
 * (`--cluster-port`), not the default port + 10000, which may be taken or out of range.
 * A free port can be taken before its node binds it (abuse.spec starts a Redis beside the cluster), and a
 * loaded machine can be slow to answer, so a round that fails (a node exits, does not answer, or the
 * cluster is not formed) starts again on new ports, up to three rounds.
 */
export function startRedisCluster(): Promise<RedisClusterProcess> {
  return onNewPorts(startOnce);
}

async function startOnce(): Promise<RedisClusterProcess> {
  const dir = mkdtempSync(join(tmpdir(), "palm-redis-cluster-"));
  const [a, b, c, ...busPorts] = await distinctFreePorts(6);
  const ports = [a, b, c];
  const children: ChildProcess[] = [];
  const stop = async () => {
    await Promise.all(children.splice(0).map(kill));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const [i, port] of ports.entries()) {
      const child = spawnServer([
        "--port",
        String(port),
        "--bind",
        "127.0.0.1",
        "--cluster-enabled",
        "yes",
        "--cluster-port",
        String(busPorts[i]),
        "--cluster-config-file",
        join(dir, `nodes-${port}.conf`),
        // A killed node's slots stay assigned to it for a minute instead of 15 s, so that a test
        // sees that node's clients fail while the others are served (no replicas to fail over to).
        "--cluster-node-timeout",
        "60000",
        "--dir",
        dir,
        "--save",
        "",
        "--appendonly",
        "no",
      ]);
      children.push(child);
    }
    for (const [i, port] of ports.entries()) await waitServing(port, children[i], 5000);
    await run("redis-cli", ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "0", "--cluster-yes"]);
    for (const port of ports) {
      await waitFor(`node ${port} not cluster_state:ok`, 15_000, async () =>
        (await cli(port, "cluster", "info")).includes("cluster_state:ok"),
      );
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { ports, nodes: ports.map((p) => `127.0.0.1:${p}`).join(","), killNode: (index) => kill(children[index]), stop };
}
