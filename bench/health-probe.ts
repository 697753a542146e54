/**
 * Load and health probes of the health scenarios (bench/scenarios.ts): analyses that keep the
 * CPUs busy, and a health probe that times the server's event loop meanwhile.
 */
import { Worker } from "node:worker_threads";
import autocannon from "autocannon";
import { PalmService } from "../gen/palm/v1/palm_pb.js";
import { callUnary, createGrpcJsClient, trackPeakRss, type ServerProcess } from "../test/helpers/index.js";
import type { Workload } from "./workloads.js";

/**
 * analyzeLoad starts autocannon POSTing workload `w` to `/v1/palm/analyze` with `key`, for
 * `amount` requests or `duration` seconds over `connections` connections (120 s request timeout).
 */
export function analyzeLoad(
  server: ServerProcess,
  key: string,
  w: Workload,
  run: { connections: number; amount?: number; duration?: number },
) {
  return autocannon({
    url: `${server.url}/v1/palm/analyze`,
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": key },
    body: JSON.stringify({ image: w.bytes.toString("base64") }),
    timeout: 120,
    ...run,
  });
}

/**
 * The health probe, in a worker thread of its own: this process also runs the load generators
 * (autocannon, grpc-js decoding multi-MB answers), and a probe on their event loop would time
 * their stalls, not the server's.
 */
const PROBE_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const http = require("node:http");
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const latencies = [];
let done = false;
parentPort.once("message", () => (done = true));
(async () => {
  while (!done) {
    const t = performance.now();
    await new Promise((resolve, reject) => {
      http.get(workerData.url + "/v1/palm/health", { agent }, (res) => {
        res.resume();
        res.on("end", () => (res.statusCode === 200 ? resolve() : reject(new Error("health " + res.statusCode))));
      }).on("error", reject);
    });
    latencies.push(performance.now() - t);
    const wait = workerData.intervalMs - (performance.now() - t);
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  }
  agent.destroy();
  parentPort.postMessage(latencies);
})().catch((e) => parentPort.postMessage({ error: String(e) }));
`;

/** probeHealth GETs /v1/palm/health every `intervalMs` (one at a time, keep-alive) until `stop` resolves. */
export async function probeHealth(url: string, stop: Promise<unknown>, intervalMs = 20): Promise<number[]> {
  const worker = new Worker(PROBE_SOURCE, { eval: true, workerData: { url, intervalMs } });
  const result = new Promise<number[] | { error: string }>((resolve, reject) => {
    worker.once("message", resolve);
    worker.once("error", reject);
  });
  await stop;
  worker.postMessage("stop");
  const out = await result;
  await worker.terminate();
  if (!Array.isArray(out)) throw new Error(`health probe failed: ${out.error}`);
  return out;
}

/**
 * saturatedHealth keeps 4 analyses of `w` in flight over `protocol` (2 running, 2 queued on a
 * 2-core machine) for `seconds` and probes the health endpoint meanwhile, from 1.5 s
 * in (once the load is in its steady state) to the end.
 */
export async function saturatedHealth(server: ServerProcess, key: string, w: Workload, protocol: "REST" | "gRPC", seconds: number) {
  const t0 = performance.now();
  let grpc: ReturnType<typeof createGrpcJsClient> | undefined;
  const load = trackPeakRss(server, async () => {
    if (protocol === "REST") {
      const r = await analyzeLoad(server, key, w, { connections: 4, duration: seconds });
      return { ok: r["2xx"], wallS: r.duration }; // its own duration: the promise resolves on a one-second ticker
    }
    grpc = createGrpcJsClient(server.port);
    const until = t0 + seconds * 1000;
    let ok = 0;
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (performance.now() < until) {
          const r = await callUnary(grpc!, PalmService.method.analyze, { image: w.bytes }, { "x-api-key": key });
          if (!r.error) ok++;
        }
      }),
    );
    return { ok, wallS: (performance.now() - t0) / 1000 };
  });
  await new Promise((r) => setTimeout(r, 1500));
  const probes = await probeHealth(server.url, load);
  const { value, peakRss } = await load;
  grpc?.close();
  return { probes, rps: value.ok / value.wallS, peakRss };
}

/** warmUp sends two analyses of `w` over REST at once, untimed: the first requests of a size pay for buffers and caches. */
export async function warmUp(server: ServerProcess, key: string, w: Workload): Promise<void> {
  await analyzeLoad(server, key, w, { connections: 2, amount: 2 });
}
