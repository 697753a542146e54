/**
 * Prometheus metrics (prom-client), one registry per server: answers by procedure, protocol and
 * code, their latency, the engine's running and queued analyses, the store's failures, and
 * prom-client's process metrics. Served at `GET /metrics` on the main port, or on a port of its
 * own with PALM_METRICS_PORT (createMetricsServer). test/integration/ops.spec.ts reads them back.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Analyzer } from "../inference/analyzer-types.js";
import type { NodeHandlerFn } from "../wire/http.js";

type NodeRequest = Parameters<NodeHandlerFn>[0];
type NodeResponse = Parameters<NodeHandlerFn>[1];

/** MetricsOptions configure {@link createMetrics}. */
export interface MetricsOptions {
  /** The engine; its running and queued analyses are read at each scrape when it can tell them. */
  analyzer: Analyzer;
  /** Whether to add prom-client's process and Node.js metrics. Default true. */
  processMetrics?: boolean;
}

/** RequestCounter counts and times answers (the access log feeds it, src/server/access-log.ts). */
export interface RequestCounter {
  /** observe counts one answer and its time in seconds; `code` is "ok" or the error table's code. */
  observe(labels: { procedure: string; protocol: string; code: string }, seconds: number): void;
}

/** PalmMetrics is the registry, the counter feeding it, and the scrape handler. */
export interface PalmMetrics extends RequestCounter {
  readonly registry: Registry;
  /** storeError counts one failure of the key and quota store seen outside an RPC (readiness). */
  storeError(source: "request" | "readiness"): void;
  /** serve answers a scrape: the text exposition format. */
  serve(req: NodeRequest, res: NodeResponse): void;
}

/** LATENCY_BUCKETS in seconds: health checks (ms) up to 12 MP analyses under load (seconds). */
export const LATENCY_BUCKETS = Object.freeze([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30]);

/** The engine's introspection, when the analyzer offers it (src/inference/analyzer.ts). */
interface StatsSource {
  stats(): { workers: number; running: number; queued: number };
  workerPids(): number[];
}

function hasStats(a: Analyzer): a is Analyzer & StatsSource {
  return typeof (a as Partial<StatsSource>).stats === "function" && typeof (a as Partial<StatsSource>).workerPids === "function";
}

/** createMetrics builds a fresh registry (several servers may live in one process, as in tests). */
export function createMetrics(options: MetricsOptions): PalmMetrics {
  const registry = new Registry();
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: "palm_requests_total",
    help: "Answers, by procedure (unmatched: no RPC was routed), protocol (grpc, grpc-web, connect, rest) and code (ok or the error table's code).",
    labelNames: ["procedure", "protocol", "code"] as const,
    registers: [registry],
  });
  const latency = new Histogram({
    name: "palm_request_duration_seconds",
    help: "Time from a request's arrival to the close of its response (the body read and the answer written).",
    labelNames: ["procedure", "protocol"] as const,
    buckets: [...LATENCY_BUCKETS],
    registers: [registry],
  });
  const storeErrors = new Counter({
    name: "palm_store_errors_total",
    help: "Failures of the key and quota store: requests answered store_unavailable, and failed readiness probes.",
    labelNames: ["source"] as const,
    registers: [registry],
  });
  const analyzer = options.analyzer;
  if (hasStats(analyzer)) {
    new Gauge({
      name: "palm_analyses_running",
      help: "Analyses running in the worker processes now.",
      registers: [registry],
      collect() {
        this.set(analyzer.stats().running);
      },
    });
    new Gauge({
      name: "palm_analyses_queued",
      help: "Analyses waiting for a worker now (beyond PALM_MAX_QUEUE they are refused with overloaded).",
      registers: [registry],
      collect() {
        this.set(analyzer.stats().queued);
      },
    });
    new Gauge({
      name: "palm_analysis_workers",
      help: "Analysis worker processes, by state: configured, and up (started and not crashed).",
      labelNames: ["state"] as const,
      registers: [registry],
      collect() {
        this.set({ state: "configured" }, analyzer.stats().workers);
        this.set({ state: "up" }, analyzer.workerPids().length);
      },
    });
  }

  return {
    registry,
    observe({ procedure, protocol, code }, seconds) {
      requests.inc({ procedure, protocol, code });
      latency.observe({ procedure, protocol }, seconds);
      if (code === "store_unavailable") storeErrors.inc({ source: "request" });
    },
    storeError: (source) => storeErrors.inc({ source }),
    serve(req, res) {
      registry.metrics().then(
        (text) => {
          res.writeHead(200, { "content-type": registry.contentType, "cache-control": "no-store" });
          if (req.method === "HEAD") res.end();
          else res.end(text);
        },
        () => {
          res.writeHead(500, { "content-type": "text/plain" });
          res.end("metrics collection failed\n");
        },
      );
    },
  };
}

/** MetricsServer is the scrape endpoint on a port of its own (PALM_METRICS_PORT). */
export interface MetricsServer {
  /** listen binds the port (0: a free one) and resolves with it. */
  listen(port: number, host?: string): Promise<number>;
  close(): Promise<void>;
}

/** createMetricsServer serves only `GET /metrics` over HTTP/1.1; every other path is 404. */
export function createMetricsServer(metrics: PalmMetrics): MetricsServer {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0];
    if (path === "/metrics" && (req.method === "GET" || req.method === "HEAD")) return metrics.serve(req, res);
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found: this port serves GET /metrics only\n");
  });
  return {
    listen: (port, host) =>
      new Promise((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, host, () => {
          server.off("error", reject);
          resolve((server.address() as AddressInfo).port);
        });
      }),
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
