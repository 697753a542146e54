/**
 * `npx tsx bench/ab-servers.ts --a DIR [--b DIR] [--rounds N]`: two versions of the server side
 * by side in one run. A server is started from each checkout (DIR: a `git worktree` with
 * node_modules; --b defaults to this checkout), both idle but for the one being measured, and in
 * each round, in a rotating order, each gets the 12 MP workload over gRPC and over REST at c=1 and
 * c=2 (6 and 12 requests). A drift of the shared machine hits both versions alike; the table gives
 * each version's median req/s per cell and B over A per round, pooled over all rounds.
 */
import { PalmService } from "../gen/palm/v1/palm_pb.js";
import { generateApiKey } from "../src/auth/api-key.js";
import { callUnary, createGrpcJsClient } from "../test/helpers/grpc.js";
import { startServerProcess, type ServerProcess } from "./server-process.js";
import { median } from "./stats.js";
import { makeWorkloads } from "./workloads.js";
import { argValue as arg } from "./args.js";

const dirA = arg("--a");
if (!dirA) throw new Error("usage: bench/ab-servers.ts --a DIR [--b DIR] [--rounds N]");
const dirB = arg("--b");
const ROUNDS = Number(arg("--rounds") ?? 4);
const PER_LOOP = 6;

const { workloads } = await makeWorkloads();
const w = workloads.find((x) => x.name === "12MP JPEG")!;
const body = JSON.stringify({ image: w.bytes.toString("base64") });
const key = generateApiKey();
const env = { PALM_DEV_KEY: key, PALM_MAX_QUEUE: "14", LOG_LEVEL: "warn", PALM_ANALYZE_TIMEOUT_MS: "120000" };

interface Side {
  name: string;
  server: ServerProcess;
  grpc: ReturnType<typeof createGrpcJsClient>;
}

async function side(name: string, dir: string | undefined): Promise<Side> {
  const server = await startServerProcess(env, [], dir);
  return { name, server, grpc: createGrpcJsClient(server.port) };
}

async function one(s: Side, protocol: "gRPC" | "REST"): Promise<void> {
  if (protocol === "gRPC") {
    const r = await callUnary(s.grpc, PalmService.method.analyze, { image: w.bytes }, { "x-api-key": key });
    if (r.error) throw new Error(`${s.name} gRPC: ${r.error.code} ${r.error.details}`);
  } else {
    const res = await fetch(`${s.server.url}/v1/palm/analyze`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": key }, body });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${s.name} REST: ${res.status}`);
  }
}

/** cell runs c closed loops of PER_LOOP requests; returns req/s. */
async function cell(s: Side, protocol: "gRPC" | "REST", c: number): Promise<number> {
  const t0 = performance.now();
  await Promise.all(Array.from({ length: c }, async () => {
    for (let i = 0; i < PER_LOOP; i++) await one(s, protocol);
  }));
  return (c * PER_LOOP) / ((performance.now() - t0) / 1000);
}

const sides = [await side("A", dirA), await side("B", dirB)];
const CELLS = [
  ["gRPC", 1],
  ["gRPC", 2],
  ["REST", 1],
  ["REST", 2],
] as const;
type Key = `${"A" | "B"} ${string}`;
const results = new Map<Key, number[]>();
try {
  for (const s of sides) for (const p of ["gRPC", "REST"] as const) await one(s, p), await one(s, p); // warm-up
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? sides : [...sides].reverse();
    for (const [p, c] of r % 4 < 2 ? CELLS : [...CELLS].reverse()) {
      for (const s of order) {
        const k: Key = `${s.name as "A" | "B"} ${p} c=${c}`;
        results.set(k, [...(results.get(k) ?? []), await cell(s, p, c)]);
      }
    }
    process.stderr.write(`round ${r + 1}/${ROUNDS} done\n`);
  }
} finally {
  for (const s of sides) {
    s.grpc.close();
    await s.server.stop();
  }
}

const f = (x: number) => x.toFixed(2);
const pooled = (xs: number[]) => xs.length / xs.reduce((a, x) => a + 1 / x, 0); // same work per cell: harmonic mean
console.log(`A: ${dirA}; B: ${dirB ?? "this checkout"}; ${ROUNDS} rounds, 12 MP JPEG, ${PER_LOOP} requests per loop\n`);
console.log("| cell | A req/s, median | B req/s, median | B / A per round | B / A pooled |");
console.log("|---|---|---|---|---|");
for (const [p, c] of CELLS) {
  const a = results.get(`A ${p} c=${c}`)!;
  const b = results.get(`B ${p} c=${c}`)!;
  console.log(`| ${p} c=${c} | ${f(median(a))} | ${f(median(b))} | ${a.map((x, i) => f(b[i] / x)).join(", ")} | ${f(pooled(b) / pooled(a))}x |`);
}
for (const s of ["A", "B"] as const) {
  for (const p of ["gRPC", "REST"]) {
    const c1 = results.get(`${s} ${p} c=1`)!;
    const c2 = results.get(`${s} ${p} c=2`)!;
    console.log(`${s} ${p} c=2 / c=1 pooled: ${f(pooled(c2) / pooled(c1))}x`);
  }
}
