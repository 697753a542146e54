/**
 * A fixed pool of inference worker processes, each running one job at a time (started with
 * ../workers/worker-process.ts: compiled from dist/, TypeScript under tsx and vitest). Processes rather
 * than threads: each worker's libvips, libuv and V8 helper threads are its own, and a worker
 * killed in the middle of a native call takes nothing else with it.
 */
import type { ChildProcess } from "node:child_process";
import { ImageError } from "../engine-errors.js";
import { siblingModuleUrl } from "../workers/worker-thread.js";
import { spawnWorkerProcess } from "../workers/worker-process.js";
import type { AnalysisResult, ImageOutput } from "./analyzer-types.js";
import type { StageTimings } from "./pipeline.js";
import type { WorkerData, WorkerReply, WorkerRequest } from "./worker-protocol.js";

/** WorkerPoolOptions configure {@link createWorkerPool}. */
export interface WorkerPoolOptions {
  /** Number of worker processes, at least 1. */
  size: number;
  /** Start-up data of every worker. */
  workerData: WorkerData;
  /** Time a worker may take to load and warm its model, ms. Default 120,000. */
  startTimeoutMs?: number;
  /** First delay before retrying a failed replacement of a dead worker, ms (doubles, at most 30 s). Default 1,000. */
  restartDelayMs?: number;
  /** Starts a worker (tests keep a handle on it or make it fail); default {@link spawnWorkerProcess}. */
  spawn?: (url: URL) => ChildProcess;
}

/** JobOutcome is a finished job. */
export interface JobOutcome {
  result: AnalysisResult;
  timings: StageTimings;
}

/** WorkerPool runs jobs on idle workers. */
export interface WorkerPool {
  /** Model version reported by the workers. */
  readonly model: string;
  /** Number of workers able to take a job now. */
  idleCount(): number;
  /** Process ids of the live workers (for memory accounting). */
  pids(): number[];
  /**
   * run sends the image bytes to an idle worker (the caller must ensure one is idle) and
   * resolves with its result. The bytes are copied; the caller keeps its buffer. When `signal`
   * aborts while the job runs, the job rejects with the signal's reason at once and its worker
   * is killed (SIGKILL) and replaced: a running analysis cannot be interrupted between the
   * native calls of the pipeline, and work nobody waits for must not keep a worker busy
   * (test/unit/inference/analyzer.spec.ts, "stops the work of an aborted running analysis").
   */
  run(bytes: Uint8Array, options?: { signal?: AbortSignal; images?: ImageOutput }): Promise<JobOutcome>;
  /** onIdle registers a callback for when a worker becomes idle. */
  onIdle(callback: () => void): void;
  /** close stops every worker; running jobs reject. */
  close(): Promise<void>;
}

const DEFAULT_START_TIMEOUT_MS = 120_000;
const DEFAULT_RESTART_DELAY_MS = 1000;
const MAX_RESTART_DELAY_MS = 30_000;

function toError(e: { imageCode?: ImageError["code"]; name: string; message: string; stack?: string }): Error {
  if (e.imageCode) return new ImageError(e.imageCode, e.message);
  const err = new Error(e.message);
  err.name = e.name;
  if (e.stack) err.stack = e.stack;
  return err;
}

function stopProcess(worker: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    worker.once("exit", () => resolve());
    worker.kill(signal);
  });
}

/** RunningJob is the job a slot's worker runs now. */
interface RunningJob {
  id: number;
  resolve: (o: JobOutcome) => void;
  reject: (e: unknown) => void;
}

/** SlotEvents are what a {@link WorkerSlot} tells its pool after start-up. */
interface SlotEvents {
  /** The slot's job finished (result or error): the slot is idle again. */
  jobDone(): void;
  /** The worker died after it was ready; its job, if any, has been rejected. */
  died(slot: WorkerSlot): void;
}

/**
 * WorkerSlot is one worker process and the one job it runs. It is busy from its start until
 * `ready` resolves, while it runs a job, and after an aborted job until its process is gone (a
 * killed worker takes no new job). `ready` rejects when the worker fails to start: it reported
 * an init error, exited, or did not report within the start timeout.
 */
class WorkerSlot {
  busy = true;
  alive = false;
  model = "";
  job: RunningJob | undefined;
  readonly ready: Promise<void>;
  private starting = true;
  private readonly startTimer: NodeJS.Timeout;
  private resolveStart!: () => void;
  private rejectStart!: (e: Error) => void;

  constructor(
    readonly worker: ChildProcess,
    data: WorkerData,
    startTimeoutMs: number,
    private readonly events: SlotEvents,
  ) {
    this.ready = new Promise((resolve, reject) => {
      this.resolveStart = resolve;
      this.rejectStart = reject;
    });
    this.startTimer = setTimeout(() => {
      if (!this.starting) return;
      this.starting = false;
      void stopProcess(worker, "SIGKILL");
      this.rejectStart(new Error(`inference worker did not start within ${startTimeoutMs} ms`));
    }, startTimeoutMs);
    worker.on("message", (msg: WorkerReply) => this.onMessage(msg));
    worker.on("error", (err) => this.onDeath(err));
    worker.on("exit", (code, signal) => this.onDeath(new Error(`worker exited with ${signal ?? `code ${code}`}`)));
    const init: WorkerRequest = { type: "init", data };
    worker.send(init, (err) => err && this.onDeath(err));
  }

  get pid(): number | undefined {
    return this.worker.pid;
  }

  /** Whether the worker can take a job now. */
  get idle(): boolean {
    return this.alive && !this.busy;
  }

  /**
   * run sends a job to this (idle) worker. When `signal` aborts, the job rejects with its reason
   * at once and the worker is killed; its exit brings a replacement (see {@link WorkerPool.run}).
   */
  run(id: number, bytes: Uint8Array, signal: AbortSignal | undefined, images: ImageOutput | undefined): Promise<JobOutcome> {
    this.busy = true;
    return new Promise<JobOutcome>((resolve, reject) => {
      const onAbort = () => {
        if (this.job?.id !== id) return;
        this.job = undefined;
        reject(signal!.reason);
        // The slot stays busy until the process is gone.
        this.worker.kill("SIGKILL");
      };
      const settle =
        <T>(fn: (v: T) => void) =>
        (v: T) => {
          signal?.removeEventListener("abort", onAbort);
          fn(v);
        };
      this.job = { id, resolve: settle(resolve), reject: settle(reject) };
      signal?.addEventListener("abort", onAbort, { once: true });
      // Serialised into the channel: the caller keeps its buffer.
      const job: WorkerRequest = { type: "job", id, bytes, images };
      this.worker.send(job, (err) => {
        if (err && this.job?.id === id) {
          this.job = undefined;
          signal?.removeEventListener("abort", onAbort);
          reject(new Error("The inference worker stopped unexpectedly.", { cause: err }));
          // A worker that cannot be written to is of no further use: its exit brings a replacement.
          this.worker.kill("SIGKILL");
        }
      });
    });
  }

  /** close stops the worker; its running job rejects once the process is gone. */
  async close(): Promise<void> {
    const job = this.job;
    this.job = undefined;
    this.alive = false;
    await stopProcess(this.worker);
    job?.reject(new Error("The analyzer is closed."));
  }

  private onMessage(msg: WorkerReply): void {
    switch (msg.type) {
      case "ready":
        if (!this.starting) return;
        this.starting = false;
        clearTimeout(this.startTimer);
        this.model = msg.model;
        this.alive = true;
        this.busy = false;
        this.resolveStart();
        return;
      case "init-error": {
        if (!this.starting) return;
        this.starting = false;
        clearTimeout(this.startTimer);
        void stopProcess(this.worker);
        const err = new Error(msg.message);
        err.name = msg.name;
        this.rejectStart(err);
        return;
      }
      case "result":
      case "error": {
        const job = this.job;
        if (!job || job.id !== msg.id) return;
        this.job = undefined;
        this.busy = false;
        if (msg.type === "result") job.resolve({ result: msg.result, timings: msg.timings });
        else job.reject(toError(msg.error));
        this.events.jobDone();
        return;
      }
    }
  }

  private onDeath(cause: unknown): void {
    if (this.starting) {
      this.starting = false;
      clearTimeout(this.startTimer);
      this.rejectStart(cause instanceof Error ? cause : new Error(`inference worker exited during start-up (${String(cause)})`));
      return;
    }
    if (!this.alive) return;
    this.alive = false;
    const job = this.job;
    this.job = undefined;
    job?.reject(new Error("The inference worker stopped unexpectedly.", { cause }));
    this.events.died(this);
  }
}

/**
 * ProcessWorkerPool keeps `size` slots filled: a worker that dies is replaced in its slot, the
 * replacement retried with a doubling delay until one starts; until then the pool runs one short.
 */
class ProcessWorkerPool implements WorkerPool {
  model = "";
  private readonly slots: WorkerSlot[] = [];
  private readonly idleCallbacks: Array<() => void> = [];
  private closed = false;
  private nextId = 1;

  constructor(private readonly options: WorkerPoolOptions) {}

  /** start fills the slots, or stops every worker and throws the first start-up error. */
  async start(size: number): Promise<void> {
    const started = await Promise.allSettled(Array.from({ length: size }, () => this.startSlot()));
    for (const s of started) if (s.status === "fulfilled") this.slots.push(s.value);
    const failure = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
    if (failure) {
      this.closed = true;
      await Promise.all(this.slots.map((s) => stopProcess(s.worker)));
      throw failure.reason;
    }
  }

  idleCount(): number {
    return this.slots.filter((s) => s.idle).length;
  }

  pids(): number[] {
    return this.slots.filter((s) => s.alive && s.pid).map((s) => s.pid!);
  }

  onIdle(callback: () => void): void {
    this.idleCallbacks.push(callback);
  }

  run(bytes: Uint8Array, runOptions: { signal?: AbortSignal; images?: ImageOutput } = {}): Promise<JobOutcome> {
    const slot = this.slots.find((s) => s.idle);
    if (!slot) return Promise.reject(new Error("no idle inference worker"));
    if (this.closed) return Promise.reject(new Error("The analyzer is closed."));
    const signal = runOptions.signal;
    if (signal?.aborted) return Promise.reject(signal.reason);
    return slot.run(this.nextId++, bytes, signal, runOptions.images);
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.slots.map((s) => s.close()));
  }

  private startSlot(): Promise<WorkerSlot> {
    const worker = (this.options.spawn ?? spawnWorkerProcess)(siblingModuleUrl(import.meta.url, "inference-worker"));
    const slot = new WorkerSlot(worker, this.options.workerData, this.options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS, {
      jobDone: () => this.notifyIdle(),
      died: (dead) => this.replace(dead),
    });
    return slot.ready.then(() => {
      this.model = slot.model;
      return slot;
    });
  }

  /** replace starts a worker for the dead one's slot, retrying with a doubling delay (at most 30 s) until one starts. */
  private replace(dead: WorkerSlot): void {
    if (this.closed) return;
    const i = this.slots.indexOf(dead);
    const attempt = (delayMs: number) =>
      this.startSlot().then(
        (fresh) => {
          if (this.closed) return void stopProcess(fresh.worker);
          if (i >= 0) this.slots[i] = fresh;
          this.notifyIdle();
        },
        () => {
          if (!this.closed) setTimeout(() => attempt(Math.min(MAX_RESTART_DELAY_MS, delayMs * 2)), delayMs).unref();
        },
      );
    void attempt(this.options.restartDelayMs ?? DEFAULT_RESTART_DELAY_MS);
  }

  private notifyIdle(): void {
    for (const cb of this.idleCallbacks) cb();
  }
}

/**
 * createWorkerPool starts `size` workers and resolves once every one has loaded its model,
 * or rejects with the first start-up error (all workers are then stopped). A worker that
 * dies later is replaced (retried until a replacement starts); its job rejects.
 */
export async function createWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const pool = new ProcessWorkerPool(options);
  await pool.start(Math.max(1, Math.floor(options.size)));
  return pool;
}
