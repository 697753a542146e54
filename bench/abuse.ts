/**
 * Fair under abuse (issue 29): a victim's latency alone and while an attacker tries each of the
 * issue's abuses, side by side on one server; and the per-client rate limit held by two replicas
 * on one Redis Cluster.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createRedisStore, type RedisStore } from "../src/auth/redis-store.js";
import { DEFAULT_RATE_LIMITS, parseRedisClusterNodes } from "../src/config.js";
import { makeImage, registerKey, startServerProcess, type ServerProcess } from "../test/helpers/index.js";
import { makeManyScanJpeg } from "../test/helpers/jpeg-scans.js";
import { cpuSecondsOf, processTree } from "../test/helpers/proc.js";
import { startRedis } from "../test/helpers/redis.js";
import { startRedisCluster } from "../test/helpers/redis-cluster.js";
import { postLarge } from "../test/helpers/upload.js";
import { codeOf, PHASES, type Phase, type PhaseDone, post } from "./abuse-clients.js";
import { median } from "./stats.js";

/** PhaseResult is the victim's requests in one phase, pooled over the rounds. */
export interface PhaseResult {
  phase: Phase;
  /** Victim request times, ms (answers of any status). */
  ms: number[];
  /** Victim answers by status. */
  statuses: Record<number, number>;
  /** The attacker's answers by "status code". */
  attacks: Record<string, number>;
  /** CPU seconds per second of the phase: the server with its workers and Redis, and the clients' process (both clients). */
  cpu: { server: number; clients: number };
}

/**
 * LAYOUTS: where the server and the clients run during a round. `shared`: nothing pinned, the
 * clients at the server's priority on the same cores (the layout of the runs before 2026-11-26,
 * when both clients ran in the bench process itself). `split`: the server with its workers and
 * Redis on every CPU but the last, the clients' process on the last one alone. `niced`: nothing
 * pinned, the clients' process at nice 19, so it gets what the server leaves.
 */
export const LAYOUTS = ["shared", "split", "niced"] as const;
export type Layout = (typeof LAYOUTS)[number];

/** AbuseRun is {@link abuseVictim}'s result: each layout's phases, and the machine around them. */
export interface AbuseRun {
  byLayout: Record<Layout, PhaseResult[]>;
  /** The CPU lists of the split layout (taskset's syntax). */
  cpus: { server: string; clients: string; all: string };
  /** os.loadavg() at the start and at the end of the measurement. */
  load: { start: number[]; end: number[] };
}

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLIENTS_SCRIPT = fileURLToPath(new URL("./abuse-clients.ts", import.meta.url));

/** pin sets the CPU affinity of every thread of each process (taskset -a -p): children started later inherit it. */
function pin(pids: readonly number[], cpus: string): void {
  for (const pid of pids) {
    const r = spawnSync("taskset", ["-a", "-p", "-c", cpus, String(pid)], { stdio: ["ignore", "ignore", "pipe"] });
    // A thread that ended meanwhile makes taskset fail for that thread alone; a missing taskset fails them all.
    if (r.error) throw new Error(`taskset: ${r.error.message} (the split layout needs util-linux's taskset)`);
  }
}

/** ClientsProcess is one layout's clients' process (bench/abuse-clients.ts). */
interface ClientsProcess {
  ask<T>(message: object): Promise<T>;
  close(): Promise<void>;
}

/** startClients starts bench/abuse-clients.ts under `prefix` (taskset, nice) with an IPC channel. */
function startClients(prefix: readonly string[]): ClientsProcess {
  const command = [...prefix, process.execPath, "--import", "tsx", CLIENTS_SCRIPT];
  const child = spawn(command[0], command.slice(1), { cwd: ROOT, stdio: ["ignore", "inherit", "inherit", "ipc"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    ask<T>(message: object) {
      return new Promise<T>((resolve, reject) => {
        const onExit = () => reject(new Error(`the clients' process (${prefix.join(" ") || "plain"}) exited`));
        child.once("exit", onExit);
        child.once("message", (m: { type: string; message?: string }) => {
          child.off("exit", onExit);
          if (m.type === "error") reject(new Error(`the clients' process: ${m.message}`));
          else resolve(m as T);
        });
        child.send(message);
      });
    },
    async close() {
      if (child.connected) child.send({ type: "exit" });
      const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/**
 * abuseVictim starts Redis and one server (`npm start`, PALM_WORKERS=1, PALM_MAX_QUEUE=0 as in the
 * issue; the per-client limits at their defaults, or lifted so that all of the attacker's requests
 * get in), and one clients' process per layout ({@link LAYOUTS}); then runs `rounds` rounds, each
 * of every layout in turn (the server and Redis re-pinned between layouts), each of the four
 * phases, `seconds` each. In every phase the victim sends its ordinary request (a 640 x 480 JPEG as
 * JSON, the full answer) one after another; the attacker, on a key of its own: nothing; 40 MP PNG
 * analyses with a 100 ms Connect deadline, one after another; 14 REST bodies of 7.4 MiB invalid
 * base64 at once, again as soon as all are answered; the 2,647-scan 10,000 x 4,000 JPEG, one after
 * another.
 */
export async function abuseVictim(
  rounds: number,
  seconds: number,
  limits: "default" | "lifted",
  log: (s: string) => void,
): Promise<AbuseRun> {
  const n = os.availableParallelism();
  if (n < 2) throw new Error("the split layout needs at least 2 CPUs");
  const cpus = { server: n > 2 ? `0-${n - 2}` : "0", clients: String(n - 1), all: `0-${n - 1}` };
  const redis = await startRedis();
  const prefix = "bench-abuse:";
  const store = createRedisStore({ url: redis.url, keyPrefix: prefix });
  const dir = mkdtempSync(join(os.tmpdir(), "palm-abuse-"));
  let server: ServerProcess | undefined;
  const clients: Partial<Record<Layout, ClientsProcess>> = {};
  try {
    await store.ready(5000);
    const victimKey = await registerKey(store, "victim", "pro");
    // With the default limits the attacker is on the smallest plan (the attacker had 5
    // requests a month); lifted, nothing but the engine's fairness stands between the two.
    const attackerKey = await registerKey(store, "attacker", limits === "default" ? "free" : "pro");
    server = await startServerProcess({
      REDIS_URL: redis.url,
      PALM_REDIS_PREFIX: prefix,
      PALM_WORKERS: "1",
      PALM_MAX_QUEUE: "0",
      ...(limits === "default" ? { PALM_RATE_LIMITS: JSON.stringify(DEFAULT_RATE_LIMITS) } : {}),
    });
    const files = {
      victim: join(dir, "victim.json"),
      deadline: join(dir, "deadline.json"),
      invalid: join(dir, "invalid.json"),
      manyScans: join(dir, "many-scans.jpg"),
    };
    writeFileSync(files.victim, JSON.stringify({ image: (await makeImage(640, 480, "jpeg")).toString("base64") }));
    writeFileSync(files.deadline, JSON.stringify({ image: (await makeImage(10_000, 4000, "png")).toString("base64") }));
    writeFileSync(files.invalid, JSON.stringify({ image: `${"A".repeat(7.4 * 1024 * 1024)}*` }));
    writeFileSync(files.manyScans, makeManyScanJpeg(10_000, 4000));

    const prefixes: Record<Layout, string[]> = { shared: [], split: ["taskset", "-c", cpus.clients], niced: ["nice", "-n", "19"] };
    for (const layout of LAYOUTS) clients[layout] = startClients(prefixes[layout]);
    const init = { type: "init", url: server.url, port: server.port, victimKey, attackerKey, files };
    for (const layout of LAYOUTS) await clients[layout]!.ask(init);

    const serverPids = () => [...processTree(server!.pid), ...(redis.pid === undefined ? [] : [redis.pid])];
    const serverCpu = () => server!.cpuSeconds() + (redis.pid === undefined ? 0 : cpuSecondsOf(redis.pid));
    const byLayout = Object.fromEntries(
      LAYOUTS.map((l) => [
        l,
        PHASES.map((phase): PhaseResult => ({ phase, ms: [], statuses: {}, attacks: {}, cpu: { server: 0, clients: 0 } })),
      ]),
    ) as Record<Layout, PhaseResult[]>;
    const load = { start: os.loadavg(), end: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      for (const layout of LAYOUTS) {
        pin(serverPids(), layout === "split" ? cpus.server : cpus.all);
        for (const [i, phase] of PHASES.entries()) {
          const out = byLayout[layout][i];
          const cpu0 = serverCpu();
          const t0 = performance.now();
          const done = await clients[layout]!.ask<PhaseDone>({ type: "phase", phase, seconds });
          const wall = (performance.now() - t0) / 1000;
          out.ms.push(...done.ms);
          for (const [s, c] of Object.entries(done.statuses)) out.statuses[Number(s)] = (out.statuses[Number(s)] ?? 0) + c;
          for (const [s, c] of Object.entries(done.attacks)) out.attacks[s] = (out.attacks[s] ?? 0) + c;
          // Pooled over the rounds: the mean of the rounds' shares.
          out.cpu.server += (serverCpu() - cpu0) / wall / rounds;
          out.cpu.clients += done.cpuSeconds / wall / rounds;
          log(
            `round ${r + 1} ${layout} ${phase}: victim p50 ${median(out.ms).toFixed(0)} ms over ${out.ms.length}; attacker ${JSON.stringify(out.attacks)}`,
          );
        }
      }
    }
    load.end = os.loadavg();
    return { byLayout, cpus, load };
  } finally {
    await Promise.all(Object.values(clients).map((c) => c.close()));
    await server?.stop();
    await store.close();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** RateHeld is what {@link rateAcrossReplicas} counted. */
export interface RateHeld {
  rate: number;
  burst: number;
  seconds: number;
  admitted: number;
  limited: number;
  /** burst + rate x the time from the first request sent to the last. */
  expected: number;
}

/**
 * rateAcrossReplicas starts a three-master Redis Cluster and two replicas (`npm start`) on it, with
 * the pro plan at `rate` per second (burst `burst`), and sends requests of one pro client to both
 * replicas in turn from 16 loops for `seconds`: bodies that the door lets in and the service
 * refuses at once (400 missing_image), so that the gate, not the engine, sets the pace. Counts the
 * requests let in (any answer but 429 rate_limited).
 */
export async function rateAcrossReplicas(rate: number, burst: number, seconds: number): Promise<RateHeld> {
  const cluster = await startRedisCluster();
  const prefix = "bench-rate:";
  const store: RedisStore = createRedisStore({ clusterNodes: parseRedisClusterNodes(cluster.nodes, []), keyPrefix: prefix });
  const servers: ServerProcess[] = [];
  try {
    await store.ready(5000);
    const key = await registerKey(store, "rated", "pro");
    const env = {
      REDIS_CLUSTER_NODES: cluster.nodes,
      PALM_REDIS_PREFIX: prefix,
      PALM_WORKERS: "1",
      PALM_RATE_LIMITS: JSON.stringify({ pro: { rate, burst, concurrency: 1000 } }),
    };
    servers.push(...(await Promise.all([startServerProcess(env), startServerProcess(env)])));
    let admitted = 0;
    let limited = 0;
    let other = 0;
    let first = Number.POSITIVE_INFINITY;
    let last = 0;
    const until = Date.now() + seconds * 1000;
    let n = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (Date.now() < until) {
          const srv = servers[n++ % servers.length];
          const sent = Date.now();
          first = Math.min(first, sent);
          last = Math.max(last, sent);
          const res = await post(`${srv.url}/v1/palm/analyze`, { "content-type": "application/json", "x-api-key": key }, "{}");
          const code = await codeOf(res);
          if (code === "429 rate_limited") limited++;
          else if (code === "400 missing_image") admitted++;
          else other++;
        }
      }),
    );
    if (other > 0) throw new Error(`${other} answers neither 400 missing_image nor 429 rate_limited`);
    const span = (last - first) / 1000;
    return { rate, burst, seconds: span, admitted, limited, expected: burst + rate * span };
  } finally {
    await Promise.all(servers.map((s) => s.stop()));
    await store.close();
    await cluster.stop();
  }
}

/** REFUSAL_KINDS: the refused requests {@link refusalCost} sends. */
export const REFUSAL_KINDS = ["small", "upload"] as const;
export type RefusalKind = (typeof REFUSAL_KINDS)[number];

/** RefusalSide is one checkout's refused requests of one kind, summed over the rounds. */
export interface RefusalSide {
  /** Answers 429 rate_limited. */
  refused: number;
  /** All the attacker's answers (any status, cut uploads included). */
  answers: number;
  /** CPU seconds of the server, its workers and Redis. */
  cpuSeconds: number;
  /** Seconds of flood. */
  seconds: number;
}

/** RefusalRun is {@link refusalCost}'s result: by kind, each side's sums ([0]: --a, [1]: this checkout). */
export interface RefusalRun {
  byKind: Record<RefusalKind, [RefusalSide, RefusalSide]>;
  cpus: { server: string; clients: string };
  load: { start: number[]; end: number[] };
}

/**
 * refusalCost measures what a refused request costs the server, for two checkouts side by side:
 * one Redis and one server per checkout (`npm start`, PALM_WORKERS=1, the default limits), the
 * servers and Redis pinned to every CPU but the last and the bench process (the client) to the
 * last. A free-plan client that has spent its burst floods one server at a time, the checkouts in
 * turn within each of `rounds` rounds, `seconds` per kind: `small`, 16 loops of keyed REST
 * requests of 2 bytes over kept-alive connections; `upload`, 14 requests of 7.4 MiB each on its own
 * HTTP/1.1 connection at once, again as soon as all are answered.
 */
export async function refusalCost(otherRoot: string, rounds: number, seconds: number, log: (s: string) => void): Promise<RefusalRun> {
  const n = os.availableParallelism();
  if (n < 2) throw new Error("refusal-cost needs at least 2 CPUs");
  const cpus = { server: n > 2 ? `0-${n - 2}` : "0", clients: String(n - 1), all: `0-${n - 1}` };
  const redis = await startRedis();
  const servers: ServerProcess[] = [];
  const stores: RedisStore[] = [];
  try {
    const keys: string[] = [];
    for (const [i, root] of [otherRoot, ROOT].entries()) {
      const prefix = `bench-refusal-${i}:`;
      const store = createRedisStore({ url: redis.url, keyPrefix: prefix });
      stores.push(store);
      await store.ready(5000);
      keys.push(await registerKey(store, "attacker", "free"));
      servers.push(
        await startServerProcess(
          { REDIS_URL: redis.url, PALM_REDIS_PREFIX: prefix, PALM_WORKERS: "1", PALM_RATE_LIMITS: JSON.stringify(DEFAULT_RATE_LIMITS) },
          [],
          root,
        ),
      );
    }
    pin([...servers.flatMap((s) => processTree(s.pid)), ...(redis.pid === undefined ? [] : [redis.pid])], cpus.server);
    pin([process.pid], cpus.clients);
    const upload = Buffer.from(JSON.stringify({ image: `${"A".repeat(7.4 * 1024 * 1024)}*` }));
    const serverCpu = (s: ServerProcess) => s.cpuSeconds() + (redis.pid === undefined ? 0 : cpuSecondsOf(redis.pid));
    const empty = (): RefusalSide => ({ refused: 0, answers: 0, cpuSeconds: 0, seconds: 0 });
    const byKind = Object.fromEntries(REFUSAL_KINDS.map((k) => [k, [empty(), empty()]])) as RefusalRun["byKind"];
    const load = { start: os.loadavg(), end: [] as number[] };
    for (let r = 0; r < rounds; r++) {
      for (const kind of REFUSAL_KINDS) {
        for (const [i, server] of servers.entries()) {
          const side = byKind[kind][i];
          const tally = (code: string) => {
            side.answers++;
            if (code === "429 rate_limited") side.refused++;
          };
          const until = Date.now() + seconds * 1000;
          const cpu0 = serverCpu(server);
          const t0 = performance.now();
          if (kind === "small") {
            const url = `${server.url}/v1/palm/analyze`;
            await Promise.all(
              Array.from({ length: 16 }, async () => {
                while (Date.now() < until)
                  tally(await codeOf(await post(url, { "content-type": "application/json", "x-api-key": keys[i] }, "{}")));
              }),
            );
          } else {
            while (Date.now() < until)
              for (const c of await Promise.all(Array.from({ length: 14 }, () => postLarge(server.port, keys[i], upload)))) tally(c);
          }
          side.seconds += (performance.now() - t0) / 1000;
          side.cpuSeconds += serverCpu(server) - cpu0;
          log(
            `round ${r + 1} ${kind} ${i === 0 ? "--a" : "this"}: ${side.refused} refused of ${side.answers}, ${((1000 * side.cpuSeconds) / side.refused).toFixed(2)} ms CPU each`,
          );
        }
      }
    }
    load.end = os.loadavg();
    return { byKind, cpus, load };
  } finally {
    pin([process.pid], cpus.all);
    await Promise.all(servers.map((s) => s.stop()));
    await Promise.all(stores.map((s) => s.close()));
    await redis.stop();
  }
}
