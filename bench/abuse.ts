/**
 * Fair under abuse (issue 29): a victim's latency alone and while an attacker tries each of the
 * issue's abuses, side by side on one server; and the per-client rate limit held by two replicas
 * on one Redis Cluster.
 */
import http from "node:http";
import { createRedisStore, type RedisStore } from "../src/auth/redis-store.js";
import { DEFAULT_RATE_LIMITS, parseRedisClusterNodes } from "../src/config.js";
import { makeImage, registerKey, startServerProcess, type ServerProcess } from "../test/helpers/index.js";
import { makeManyScanJpeg } from "../test/helpers/jpeg-scans.js";
import { startRedis } from "../test/helpers/redis.js";
import { startRedisCluster } from "../test/helpers/redis-cluster.js";
import { median } from "./stats.js";

/** The phases of {@link abuseVictim}: the victim alone, then under each of the abuses 1-3. */
export const PHASES = ["alone", "short deadlines (1)", "invalid base64 bodies (2)", "many-scan JPEG (3)"] as const;
export type Phase = (typeof PHASES)[number];

/** PhaseResult is the victim's requests in one phase, pooled over the rounds. */
export interface PhaseResult {
  phase: Phase;
  /** Victim request times, ms (answers of any status). */
  ms: number[];
  /** Victim answers by status. */
  statuses: Record<number, number>;
  /** The attacker's answers by "status code". */
  attacks: Record<string, number>;
  /** CPU seconds per second of the phase: the server with its workers, and the bench process (both clients). */
  cpu: { server: number; clients: number };
}

const post = (url: string, headers: Record<string, string>, body: Uint8Array | string) =>
  fetch(url, { method: "POST", headers, body: typeof body === "string" ? body : new Uint8Array(body) });

async function codeOf(res: Response): Promise<string> {
  const text = await res.text();
  let code = "";
  try {
    const json = JSON.parse(text) as { code?: string; error?: { code?: string } };
    code = json.error?.code ?? json.code ?? "";
  } catch {}
  return `${res.status} ${code}`.trim();
}

/** postLarge sends `body` over its own HTTP/1.1 connection (fetch would share a few). */
function postLarge(port: number, key: string, body: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: "127.0.0.1",
        port,
        path: "/v1/palm/analyze?images=none",
        method: "POST",
        headers: { "content-type": "application/json", "x-api-key": key },
        agent: false,
      },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (text += d));
        res.on("end", () => {
          let code = "";
          try {
            code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? "";
          } catch {}
          resolve(`${res.statusCode} ${code}`.trim());
        });
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/**
 * abuseVictim starts Redis and one server (`npm start`, PALM_WORKERS=1, PALM_MAX_QUEUE=0 as in the
 * issue; the per-client limits at their defaults, or lifted so that all of the attacker's requests
 * get in), then runs `rounds`
 * rounds of the four phases, `seconds` each. In every phase the victim sends its ordinary request
 * (a 640 x 480 JPEG as JSON, the full answer) one after another; the attacker, on a key of its
 * own: nothing; 40 MP PNG analyses with a 100 ms Connect deadline, one after another; 14 REST
 * bodies of 7.4 MiB invalid base64 at once, again as soon as all are answered; the 2,647-scan
 * 10,000 x 4,000 JPEG, one after another.
 */
export async function abuseVictim(
  rounds: number,
  seconds: number,
  limits: "default" | "lifted",
  log: (s: string) => void,
): Promise<PhaseResult[]> {
  const redis = await startRedis();
  const prefix = "bench-abuse:";
  const store = createRedisStore({ url: redis.url, keyPrefix: prefix });
  let server: ServerProcess | undefined;
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
    const url = `${server.url}/v1/palm/analyze`;
    const victimBody = JSON.stringify({ image: (await makeImage(640, 480, "jpeg")).toString("base64") });
    const png = await makeImage(10_000, 4000, "png");
    const deadlineBody = JSON.stringify({ image: png.toString("base64") });
    const invalid = Buffer.from(JSON.stringify({ image: `${"A".repeat(7.4 * 1024 * 1024)}*` }));
    const manyScans = makeManyScanJpeg(10_000, 4000);
    const port = server.port;

    const attackers: Record<Phase, (until: number, tally: (code: string) => void) => Promise<void>> = {
      alone: async () => {},
      "short deadlines (1)": async (until, tally) => {
        while (Date.now() < until) {
          const res = await post(
            `${server!.url}/palm.v1.PalmService/Analyze`,
            { "content-type": "application/json", "connect-timeout-ms": "100", "x-api-key": attackerKey },
            deadlineBody,
          );
          tally(await codeOf(res));
        }
      },
      "invalid base64 bodies (2)": async (until, tally) => {
        while (Date.now() < until) {
          for (const code of await Promise.all(Array.from({ length: 14 }, () => postLarge(port, attackerKey, invalid)))) tally(code);
        }
      },
      "many-scan JPEG (3)": async (until, tally) => {
        while (Date.now() < until) {
          const res = await post(`${url}?images=none`, { "content-type": "image/jpeg", "x-api-key": attackerKey }, manyScans);
          tally(await codeOf(res));
        }
      },
    };

    // One untimed victim request: the engine and the connection warm.
    await (await post(url, { "content-type": "application/json", "x-api-key": victimKey }, victimBody)).arrayBuffer();
    const results = PHASES.map((phase): PhaseResult => ({ phase, ms: [], statuses: {}, attacks: {}, cpu: { server: 0, clients: 0 } }));
    const clientCpu = () => {
      const u = process.cpuUsage();
      return (u.user + u.system) / 1e6;
    };
    for (let r = 0; r < rounds; r++) {
      for (const [i, phase] of PHASES.entries()) {
        const out = results[i];
        const [server0, clients0, t0] = [server.cpuSeconds(), clientCpu(), performance.now()];
        const until = Date.now() + seconds * 1000;
        const attack = attackers[phase](until, (code) => (out.attacks[code] = (out.attacks[code] ?? 0) + 1));
        // The victim starts once the attack is under way.
        if (phase !== "alone") await new Promise((res) => setTimeout(res, 300));
        while (Date.now() < until) {
          const t0 = performance.now();
          const res = await post(url, { "content-type": "application/json", "x-api-key": victimKey }, victimBody);
          await res.arrayBuffer();
          out.ms.push(performance.now() - t0);
          out.statuses[res.status] = (out.statuses[res.status] ?? 0) + 1;
        }
        await attack;
        const wall = (performance.now() - t0) / 1000;
        // Pooled over the rounds: the mean of the rounds' shares.
        out.cpu.server += (server.cpuSeconds() - server0) / wall / rounds;
        out.cpu.clients += (clientCpu() - clients0) / wall / rounds;
        log(
          `round ${r + 1} ${phase}: victim p50 ${median(out.ms).toFixed(0)} ms over ${out.ms.length}; attacker ${JSON.stringify(out.attacks)}`,
        );
      }
    }
    return results;
  } finally {
    await server?.stop();
    await store.close();
    await redis.stop();
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
