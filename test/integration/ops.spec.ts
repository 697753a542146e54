/**
 * Operations endpoints on a real server with the real engine: GET /metrics (prom-client) on the
 * main port or on PALM_METRICS_PORT, GET /v1/palm/ready, and the store's failures counted.
 */
import { createServer } from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PalmService } from "../../gen/palm/v1/palm_pb.js";
import { createMemoryStore } from "../../src/auth/memory-store.js";
import { createRedisStore } from "../../src/auth/redis-store.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { startKeyedServer, startServer, type KeyedTestServer, type TestServer } from "../helpers/server.js";

let analyzer: EngineAnalyzer;
beforeAll(async () => {
  analyzer = await createTestAnalyzer();
});
afterAll(async () => {
  await analyzer?.close();
});

/** sample reads one sample's value from the exposition text (undefined when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split("\n")) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? "").matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

/** A port nothing listens on (bound, read, closed). */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", () => r()));
  const port = (s.address() as { port: number }).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe("GET /metrics on the main port", () => {
  let srv: KeyedTestServer;
  let key: string;
  beforeAll(async () => {
    srv = await startKeyedServer({ analyzer, client: "acme", plan: "free" });
    key = srv.key;
  });
  afterAll(() => srv?.close());

  it("counts requests by procedure, protocol and code, and times them", async () => {
    const before = await (await fetch(`${srv.url}/metrics`)).text();
    const health = { procedure: "/palm.v1.PalmService/Health", protocol: "rest", code: "ok" };
    const n0 = sample(before, "palm_requests_total", health) ?? 0;
    expect((await fetch(`${srv.url}/v1/palm/health`)).status).toBe(200);
    const refused = await fetch(`${srv.url}/v1/palm/analyze`, { method: "POST", headers: { "x-api-key": "palm_live_nope" }, body: "{}" });
    expect(refused.status).toBe(401);
    const client = createClient(PalmService, createGrpcTransport({ baseUrl: srv.url }));
    await client.health({});

    const res = await fetch(`${srv.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    expect(sample(text, "palm_requests_total", health)).toBe(n0 + 1);
    expect(
      sample(text, "palm_requests_total", { procedure: "/palm.v1.PalmService/Analyze", protocol: "rest", code: "invalid_api_key" }),
    ).toBe(1);
    expect(sample(text, "palm_requests_total", { procedure: "/palm.v1.PalmService/Health", protocol: "grpc", code: "ok" })).toBe(1);
    expect(sample(text, "palm_request_duration_seconds_count", { procedure: "/palm.v1.PalmService/Health", protocol: "rest" })).toBe(
      n0 + 1,
    );
    expect(
      sample(text, "palm_request_duration_seconds_bucket", { procedure: "/palm.v1.PalmService/Health", protocol: "grpc", le: "+Inf" }),
    ).toBe(1);
    expect(sample(text, "process_resident_memory_bytes")).toBeGreaterThan(0);
  });

  it("reports the engine's running and queued analyses and its workers", async () => {
    const text = await (await fetch(`${srv.url}/metrics`)).text();
    expect(sample(text, "palm_analyses_running")).toBe(0);
    expect(sample(text, "palm_analyses_queued")).toBe(0);
    expect(sample(text, "palm_analysis_workers", { state: "configured" })).toBe(1);
    expect(sample(text, "palm_analysis_workers", { state: "up" })).toBe(1);
  });

  it("counts an analysis as ok once it succeeded", async () => {
    const { readFileSync } = await import("node:fs");
    const image = readFileSync(new URL("../../examples/sample-palm.jpg", import.meta.url)).toString("base64");
    const res = await fetch(`${srv.url}/v1/palm/analyze`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ image }),
    });
    expect(res.status).toBe(200);
    const text = await (await fetch(`${srv.url}/metrics`)).text();
    expect(sample(text, "palm_requests_total", { procedure: "/palm.v1.PalmService/Analyze", protocol: "rest", code: "ok" })).toBe(1);
  });
});

describe("PALM_METRICS_PORT", () => {
  let srv: TestServer;
  beforeAll(async () => {
    srv = await startServer({ analyzer, store: createMemoryStore(), config: { metricsPort: 0 } });
  });
  afterAll(() => srv?.close());

  it("serves /metrics on its own port and not on the main one", async () => {
    expect(srv.server.metricsPort).toBeGreaterThan(0);
    expect(srv.server.metricsPort).not.toBe(srv.port);
    await fetch(`${srv.url}/v1/palm/health`);
    const own = await fetch(`http://127.0.0.1:${srv.server.metricsPort}/metrics`);
    expect(own.status).toBe(200);
    expect(
      sample(await own.text(), "palm_requests_total", { procedure: "/palm.v1.PalmService/Health", protocol: "rest", code: "ok" }),
    ).toBe(1);
    const main = await fetch(`${srv.url}/metrics`);
    expect(main.status).toBe(404);
    expect((await main.json()).error.code).toBe("not_found");
    expect((await fetch(`http://127.0.0.1:${srv.server.metricsPort}/v1/palm/health`)).status).toBe(404);
  });
});

describe("GET /v1/palm/ready", () => {
  it("answers 200 with every check ok when the model, the workers and the store are there", async () => {
    const srv = await startServer({ analyzer, store: createMemoryStore() });
    try {
      const res = await fetch(`${srv.url}/v1/palm/ready`);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        status: "ready",
        checks: { model: "ok", workers: "ok", workers_up: "1 of 1", store: "ok", draining: false },
      });
    } finally {
      await srv.close();
    }
  });

  it("answers 503 store unavailable when Redis does not answer, and counts the store error", async () => {
    const store = createRedisStore({ url: `redis://127.0.0.1:${await closedPort()}`, commandTimeoutMs: 200, onError: () => {} });
    const srv = await startServer({ analyzer, store, config: { redisCommandTimeoutMs: 200 } });
    try {
      const res = await fetch(`${srv.url}/v1/palm/ready`);
      expect(res.status).toBe(503);
      expect((await res.json()).checks).toMatchObject({ store: "unavailable", model: "ok", workers: "ok" });
      const refused = await fetch(`${srv.url}/v1/palm/analyze`, {
        method: "POST",
        headers: { "x-api-key": `palm_live_${"0".repeat(32)}` },
        body: "{}",
      });
      expect(refused.status).toBe(503);
      const text = await (await fetch(`${srv.url}/metrics`)).text();
      expect(sample(text, "palm_store_errors_total", { source: "readiness" })).toBe(1);
      expect(sample(text, "palm_store_errors_total", { source: "request" })).toBe(1);
    } finally {
      await srv.close();
      await store.close();
    }
  });

  it("needs no key and is not an RPC: other methods get the REST 404 body", async () => {
    const srv = await startServer({ analyzer, store: createMemoryStore() });
    try {
      const res = await fetch(`${srv.url}/v1/palm/ready`, { method: "POST" });
      expect(res.status).toBe(404);
      expect((await res.json()).error.code).toBe("not_found");
    } finally {
      await srv.close();
    }
  });
});
