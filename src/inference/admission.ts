/**
 * Admission of analyses to the worker pool: at most `maxInFlight` run and `maxQueue` wait (an
 * analysis held by its `admitted` hook counts as waiting); beyond that, OverloadedError at once
 * with a retry hint from the recent mean duration, so that overload is refused instead of growing
 * memory or timing everyone out (test/unit/inference/analyzer.spec.ts).
 *
 * Fair: waiting analyses are handed to workers client by client in turn (round robin), and when
 * every place is taken a newcomer whose client holds fewer waiting places than the client holding
 * the most takes that client's newest waiting place (which gets OverloadedError): one client's
 * backlog never pushes others into `overloaded` (test/unit/inference/admission.spec.ts).
 *
 * Deadlines: an analysis whose deadline is sooner than it is expected to take ({@link
 * AdmissionQueue.expectedMs}: a lower bound learnt from recent analyses, finished or stopped
 * unfinished, scaled to the image's pixel count) is refused before it starts
 * (DeadlineTooShortError, 504, nothing run), so work that nobody will wait for is not started
 * (test/integration/abuse.spec.ts, finding 1; test/unit/inference/admission.spec.ts).
 */
import { DeadlineTooShortError, OverloadedError } from "../engine-errors.js";
import type { AnalysisResult, AnalyzeOptions, ImageOutput } from "./analyzer-types.js";
import type { StageTimings } from "./pipeline.js";
import type { WorkerPool } from "./worker-pool.js";
import { nextInTurn } from "../workers/fair-turn.js";

/** CLOSE_WAIT_MS bounds how long close() waits for running analyses. */
const CLOSE_WAIT_MS = 10_000;

/** RECENT_ANALYSES: how many finished analyses the deadline rule remembers. */
const RECENT_ANALYSES = 32;

/** Pending is an admitted analysis not yet handed to a worker. */
interface Pending {
  bytes: Uint8Array;
  /** The client it is queued for ("" when unnamed). */
  client: string;
  /** Header pixel count, when known. */
  pixels?: number;
  images?: ImageOutput;
  resolve: (r: AnalysisResult) => void;
  reject: (e: unknown) => void;
  signal?: AbortSignal;
  onAbort?: () => void;
  settled: boolean;
  /** Admitted but waiting for its `admitted` hook: holds a place, is not dispatched yet. */
  held: boolean;
}

/** Finished is a finished analysis as the deadline rule remembers it. */
interface Finished {
  pixels: number;
  ms: number;
  /** Of `ms`, the decode stages (reduced and full size): the part that grows with the pixel count. */
  decodeMs: number;
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
  /** The last analyses that finished: pixels, time (ms) and the part of it spent decoding. */
  private readonly finished: Finished[] = [];
  /**
   * The last analyses stopped unfinished by their deadline: pixels and time run. Kept apart from
   * the finished ones, so that a stream of small analyses does not make the rule forget them.
   */
  private readonly unfinished: { pixels: number; ms: number }[] = [];
  /** The client served last (round robin). */
  private lastClient = "";

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
  submit(image: Uint8Array, options: AnalyzeOptions & { pixels?: number } = {}): Promise<AnalysisResult> {
    const signal = options.signal;
    const client = options.clientId ?? "";
    if (options.deadline !== undefined) {
      const remainingMs = options.deadline - Date.now();
      const expectedMs = this.expectedMs(options.pixels);
      if (remainingMs < expectedMs) return Promise.reject(new DeadlineTooShortError(remainingMs, expectedMs));
    }
    // Running, queued and held analyses together within maxInFlight + maxQueue: a held one
    // (waiting for its `admitted` hook) is about to run or queue.
    const waiting = this.queue.length;
    if (this.runningCount + waiting >= this.maxInFlight + this.maxQueue) {
      const seconds = Math.max(1, Math.ceil(((waiting + this.runningCount) / this.maxInFlight) * (this.meanMs / 1000)));
      const victim = this.placeToTake(client);
      if (!victim) return Promise.reject(new OverloadedError(seconds));
      this.drop(victim, new OverloadedError(seconds));
    }
    return new Promise<AnalysisResult>((resolve, reject) => {
      const admitted = options.admitted;
      const p: Pending = {
        bytes: image,
        client,
        pixels: options.pixels,
        images: options.images,
        resolve,
        reject,
        signal,
        settled: false,
        held: admitted !== undefined,
      };
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
      // The oldest ready (not held) analysis of the next client in turn.
      const i = nextInTurn(this.queue, this.lastClient, (q) => !q.held);
      if (i < 0) break;
      const p = this.queue.splice(i, 1)[0];
      if (p.settled) continue;
      this.lastClient = p.client;
      this.start(p);
    }
  }

  /**
   * placeToTake is the waiting analysis a newcomer of `client` takes the place of when every
   * place is taken: the newest of the client with the most waiting, when that is more than
   * `client` has; undefined when `client` already has as many as anyone.
   */
  private placeToTake(client: string): Pending | undefined {
    const counts = new Map<string, number>();
    for (const q of this.queue) counts.set(q.client, (counts.get(q.client) ?? 0) + 1);
    let top: string | undefined;
    for (const [c, n] of counts) if (top === undefined || n > (counts.get(top) ?? 0)) top = c;
    if (top === undefined || top === client || (counts.get(top) ?? 0) <= (counts.get(client) ?? 0) + 1) return undefined;
    for (let i = this.queue.length - 1; i >= 0; i--) if (this.queue[i].client === top) return this.queue[i];
    return undefined;
  }

  /**
   * expectedMs is the least an analysis of `pixels` is expected to take (0 when nothing is known),
   * the largest of three lower bounds: the fastest finished analysis of an image no larger (a
   * larger image never takes less); the fixed part plus the decode time per pixel, each the least
   * seen, times `pixels` (so that an image far larger than any seen is not expected to take what a
   * small one did); and the longest run stopped unfinished of an image no larger. Unknown `pixels`
   * compares with every image.
   */
  private expectedMs(pixels: number | undefined): number {
    let fastest = Number.POSITIVE_INFINITY;
    let fixed = Number.POSITIVE_INFINITY;
    let perPixel = Number.POSITIVE_INFINITY;
    for (const r of this.finished) {
      fixed = Math.min(fixed, r.ms - r.decodeMs);
      if (r.pixels > 0) perPixel = Math.min(perPixel, r.decodeMs / r.pixels);
      if (pixels === undefined || r.pixels <= pixels) fastest = Math.min(fastest, r.ms);
    }
    let expected = Number.isFinite(fastest) ? fastest : 0;
    if (pixels !== undefined && Number.isFinite(fixed) && Number.isFinite(perPixel))
      expected = Math.max(expected, fixed + perPixel * pixels);
    for (const u of this.unfinished) if (pixels === undefined || u.pixels <= pixels) expected = Math.max(expected, u.ms);
    return expected;
  }

  /**
   * finishedOne remembers a finished analysis; a run stopped unfinished of an image no larger that
   * had run longer is forgotten (the replica was slower then, or busier).
   */
  private finishedOne(r: Finished): void {
    this.finished.push(r);
    if (this.finished.length > RECENT_ANALYSES) this.finished.shift();
    for (let i = this.unfinished.length - 1; i >= 0; i--) {
      const u = this.unfinished[i];
      if (u.pixels <= r.pixels && u.ms > r.ms) this.unfinished.splice(i, 1);
    }
  }

  private unfinishedOne(r: { pixels: number; ms: number }): void {
    this.unfinished.push(r);
    if (this.unfinished.length > RECENT_ANALYSES) this.unfinished.shift();
  }

  private start(p: Pending): void {
    this.runningCount++;
    const started = performance.now();
    // Its place is free before its caller hears: a client that sends its next analysis on the
    // answer finds the place its last one left (admission.spec.ts, "deadline rule").
    const ended = () => {
      this.runningCount--;
      this.dispatch();
    };
    this.pool.run(p.bytes, { signal: p.signal, images: p.images }).then(
      ({ result, timings }) => {
        const ms = performance.now() - started;
        this.meanMs = 0.8 * this.meanMs + 0.2 * ms;
        this.finishedOne({
          pixels: p.pixels ?? result.width * result.height,
          ms,
          decodeMs: Math.min(ms, timings.decode + timings.fullDecode),
        });
        ended();
        this.onTimings?.(timings);
        if (this.settle(p)) p.resolve(result);
      },
      (e) => {
        // Stopped unfinished by its signal: an image of that size takes longer than this.
        if (p.signal?.aborted) this.unfinishedOne({ pixels: p.pixels ?? Number.POSITIVE_INFINITY, ms: performance.now() - started });
        ended();
        if (this.settle(p)) p.reject(e);
      },
    );
    // Running jobs no longer need the caller's bytes.
    p.bytes = new Uint8Array(0);
  }
}
