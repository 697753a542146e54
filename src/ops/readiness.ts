/**
 * Readiness (`GET /v1/palm/ready`), distinct from liveness (`/v1/palm/health`, which answers while
 * the process serves at all): 200 once the model is loaded, the analysis workers are up and the
 * key and quota store answers; 503 otherwise, and from the start of a shutdown on, so that a load
 * balancer stops sending new work while in-flight requests drain. No key needed.
 * test/integration/ops.spec.ts covers each state.
 */
import type { Store } from "../auth/store.js";
import type { Analyzer } from "../inference/analyzer-types.js";

/** ReadinessOptions configure {@link createReadiness}. */
export interface ReadinessOptions {
  analyzer: Analyzer;
  store: Store;
  /** Aborted when shutdown begins: not ready from then on. */
  stopping: AbortSignal;
  /** How long the store may take to answer the probe, ms. Default 1000. */
  storeTimeoutMs?: number;
  /** Called when the store probe fails (metrics). */
  onStoreError?: () => void;
}

/** ReadinessReport is the JSON body of `/v1/palm/ready`. */
export interface ReadinessReport {
  status: "ready" | "not_ready";
  checks: {
    /** "ok", or "not_loaded". */
    model: string;
    /** "ok" (at least one worker up: "N of M up" is in `workers_up`), or "down". */
    workers: string;
    workers_up?: string;
    /** "ok", or "unavailable". */
    store: string;
    /** True from the start of a shutdown. */
    draining: boolean;
  };
}

/** Readiness checks the service's dependencies on demand. */
export interface Readiness {
  check(): Promise<ReadinessReport>;
}

/** READY_PROBE_CLIENT is the client id the store probe reads (never created: a miss is an answer). */
const READY_PROBE_CLIENT = "__readiness_probe__";

/** createReadiness returns the checks for one server. */
export function createReadiness(options: ReadinessOptions): Readiness {
  const timeoutMs = options.storeTimeoutMs ?? 1000;
  const analyzer = options.analyzer as Analyzer & Partial<{ stats(): { workers: number }; workerPids(): number[] }>;

  async function storeAnswers(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    try {
      // A read of a client that does not exist: one round trip on Redis, nothing written.
      await Promise.race([
        options.store.getClient(READY_PROBE_CLIENT),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error("store probe timed out")), timeoutMs))),
      ]);
      return true;
    } catch {
      options.onStoreError?.();
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  return {
    async check() {
      const draining = options.stopping.aborted;
      const model = analyzer.model ? "ok" : "not_loaded";
      let workers = "ok";
      let workersUp: string | undefined;
      if (analyzer.stats && analyzer.workerPids) {
        const up = analyzer.workerPids().length;
        workersUp = `${up} of ${analyzer.stats().workers}`;
        if (up === 0) workers = "down";
      }
      const store = (await storeAnswers()) ? "ok" : "unavailable";
      const ready = !draining && model === "ok" && workers === "ok" && store === "ok";
      return {
        status: ready ? "ready" : "not_ready",
        checks: { model, workers, ...(workersUp ? { workers_up: workersUp } : {}), store, draining },
      };
    },
  };
}
