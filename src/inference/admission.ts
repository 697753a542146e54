/**
 * Admission of analyses to the worker pool: at most `maxInFlight` run and `maxQueue` wait (an
 * analysis held by its `admitted` hook counts as waiting); beyond that, OverloadedError at once
 * with a retry hint from the recent mean duration, so that overload is refused instead of growing
 * memory or timing everyone out (test/unit/inference/analyzer.spec.ts).
 */
import { OverloadedError } from "../api/engine-errors.js";
import type { AnalysisResult, AnalyzeOptions, ImageOutput } from "./analyzer-types.js";
import type { StageTimings } from "./pipeline.js";
import type { WorkerPool } from "./worker-pool.js";

/** CLOSE_WAIT_MS bounds how long close() waits for running analyses. */
const CLOSE_WAIT_MS = 10_000;

/** Pending is an admitted analysis not yet handed to a worker. */
interface Pending {
  bytes: Uint8Array;
  images?: ImageOutput;
  resolve: (r: AnalysisResult) => void;
  reject: (e: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
  settled: boolean;
  /** Admitted but waiting for its `admitted` hook: holds a place, is not dispatched yet. */
  held: boolean;
}

/** abortReason is the signal's reason, or an AbortError where it has none. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException("The operation was aborted.", "AbortError");
}

/** AdmissionQueue admits analyses within its bounds and hands them to idle workers in order. */
export class AdmissionQueue {
  private readonly queue: Pending[] = [];
  private runningCount = 0;
  private closedFlag = false;
  /** Running mean of analysis durations, ms, for the Retry-After hint. */
  private meanMs = 1000;

  constructor(
    private readonly pool: WorkerPool,
    readonly maxInFlight: number,
    readonly maxQueue: number,
    private readonly onTimings?: (timings: StageTimings) => void,
  ) {
    pool.onIdle(() => this.dispatch());
  }

  get running(): number {
    return this.runningCount;
  }

  get queued(): number {
    return this.queue.filter((p) => !p.settled).length;
  }

  get closed(): boolean {
    return this.closedFlag;
  }

  /**
   * submit admits `image` or rejects at once with OverloadedError. An aborted signal rejects a
   * queued analysis at once with the signal's reason and frees its place; a running one rejects
   * at once too, and its worker is killed and replaced (worker-pool.ts).
   */
  submit(image: Uint8Array, options: AnalyzeOptions = {}): Promise<AnalysisResult> {
    const signal = options.signal;
    // Running, queued and held analyses together within maxInFlight + maxQueue: a held one
    // (waiting for its `admitted` hook) is about to run or queue.
    const waiting = this.queue.length;
    if (this.runningCount + waiting >= this.maxInFlight + this.maxQueue) {
      const seconds = Math.max(1, Math.ceil(((waiting + this.runningCount) / this.maxInFlight) * (this.meanMs / 1000)));
      return Promise.reject(new OverloadedError(seconds));
    }
    return new Promise<AnalysisResult>((resolve, reject) => {
      const admitted = options.admitted;
      const p: Pending = { bytes: image, images: options.images, resolve, reject, signal, settled: false, held: admitted !== undefined };
      if (signal) {
        p.onAbort = () => this.drop(p, abortReason(signal));
        signal.addEventListener("abort", p.onAbort, { once: true });
      }
      this.queue.push(p);
      if (!admitted) return this.dispatch();
      admitted().then(
        () => {
          p.held = false;
          this.dispatch();
        },
        (e: unknown) => this.drop(p, e),
      );
    });
  }

  /** close rejects every queued analysis, then waits (within a bound) for the running ones. */
  async close(): Promise<void> {
    this.closedFlag = true;
    for (const p of this.queue.splice(0)) if (this.settle(p)) p.reject(new Error("The analyzer is closed."));
    // Running analyses (an aborted one's worker is already being killed): let them finish
    // first, within a bound, so that a worker is never stopped in the middle of its work.
    const deadline = Date.now() + CLOSE_WAIT_MS;
    while (this.runningCount > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  }

  /** drop rejects a queued or held analysis with `reason` and frees its place. */
  private drop(p: Pending, reason: unknown): void {
    if (!this.settle(p)) return;
    const i = this.queue.indexOf(p);
    if (i >= 0) this.queue.splice(i, 1);
    p.reject(reason);
    this.dispatch();
  }

  private settle(p: Pending): boolean {
    if (p.settled) return false;
    p.settled = true;
    if (p.signal && p.onAbort) p.signal.removeEventListener("abort", p.onAbort);
    return true;
  }

  private dispatch(): void {
    while (!this.closedFlag && this.runningCount < this.maxInFlight && this.pool.idleCount() > 0) {
      const i = this.queue.findIndex((q) => !q.held);
      if (i < 0) break;
      const p = this.queue.splice(i, 1)[0];
      if (p.settled) continue;
      this.start(p);
    }
  }

  private start(p: Pending): void {
    this.runningCount++;
    const started = performance.now();
    this.pool
      .run(p.bytes, { signal: p.signal, images: p.images })
      .then(
        ({ result, timings }) => {
          this.meanMs = 0.8 * this.meanMs + 0.2 * (performance.now() - started);
          this.onTimings?.(timings);
          if (this.settle(p)) p.resolve(result);
        },
        (e) => {
          if (this.settle(p)) p.reject(e);
        },
      )
      .finally(() => {
        this.runningCount--;
        this.dispatch();
      });
    // Running jobs no longer need the caller's bytes.
    p.bytes = new Uint8Array(0);
  }
}
