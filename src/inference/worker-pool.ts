/**
 * A fixed pool of inference worker threads, each running one job at a time (started with
 * ../worker-thread.ts, so the TypeScript entry also runs under tsx and vitest).
 */
import type { Worker } from "node:worker_threads";
import { ImageError } from "../image/image-error.js";
import { siblingModuleUrl, spawnWorker } from "../worker-thread.js";
import type { AnalysisResult } from "./analyzer-types.js";
import type { StageTimings } from "./pipeline.js";
import type { WorkerData, WorkerReply } from "./worker-protocol.js";

/** WorkerPoolOptions configure {@link createWorkerPool}. */
export interface WorkerPoolOptions {
  /** Number of worker threads, at least 1. */
  size: number;
  /** Start-up data of every worker. */
  workerData: WorkerData;
  /** Time a worker may take to load and warm its model, ms. Default 120,000. */
  startTimeoutMs?: number;
  /** First delay before retrying a failed replacement of a dead worker, ms (doubles, at most 30 s). Default 1,000. */
  restartDelayMs?: number;
  /** Starts a worker (tests keep a handle on it or make it fail); default {@link spawnWorker}. */
  spawn?: typeof spawnWorker;
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
  /**
   * run sends the image bytes to an idle worker (the caller must ensure one is idle) and
   * resolves with its result. The bytes are copied; the caller keeps its buffer.
   */
  run(bytes: Uint8Array): Promise<JobOutcome>;
  /** onIdle registers a callback for when a worker becomes idle. */
  onIdle(callback: () => void): void;
  /** close terminates every worker; running jobs reject. */
  close(): Promise<void>;
}

interface Slot {
  worker: Worker;
  busy: boolean;
  alive: boolean;
  job?: { id: number; resolve: (o: JobOutcome) => void; reject: (e: unknown) => void };
}

function toError(e: { imageCode?: ImageError["code"]; name: string; message: string; stack?: string }): Error {
  if (e.imageCode) return new ImageError(e.imageCode, e.message);
  const err = new Error(e.message);
  err.name = e.name;
  if (e.stack) err.stack = e.stack;
  return err;
}

/**
 * createWorkerPool starts `size` workers and resolves once every one has loaded its model,
 * or rejects with the first start-up error (all workers are then terminated). A worker that
 * dies later is replaced (retried until a replacement starts); its job rejects.
 */
export async function createWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const size = Math.max(1, Math.floor(options.size));
  const slots: Slot[] = [];
  const idleCallbacks: Array<() => void> = [];
  let closed = false;
  let nextId = 1;
  let model = "";

  function notifyIdle(): void {
    for (const cb of idleCallbacks) cb();
  }

  function start(): Promise<Slot> {
    return new Promise((resolveStart, rejectStart) => {
      const worker = (options.spawn ?? spawnWorker)(siblingModuleUrl(import.meta.url, "inference-worker"), options.workerData);
      const slot: Slot = { worker, busy: true, alive: false };
      let started = false;
      const timer = setTimeout(() => {
        if (!started) {
          started = true;
          void worker.terminate();
          rejectStart(new Error(`inference worker did not start within ${options.startTimeoutMs ?? 120_000} ms`));
        }
      }, options.startTimeoutMs ?? 120_000);
      worker.on("message", (msg: WorkerReply) => {
        switch (msg.type) {
          case "ready":
            started = true;
            clearTimeout(timer);
            model = msg.model;
            slot.alive = true;
            slot.busy = false;
            resolveStart(slot);
            return;
          case "init-error": {
            started = true;
            clearTimeout(timer);
            void worker.terminate();
            const err = new Error(msg.message);
            err.name = msg.name;
            rejectStart(err);
            return;
          }
          case "result":
          case "error": {
            const job = slot.job;
            if (!job || job.id !== msg.id) return;
            slot.job = undefined;
            slot.busy = false;
            if (msg.type === "result") job.resolve({ result: msg.result, timings: msg.timings });
            else job.reject(toError(msg.error));
            notifyIdle();
            return;
          }
        }
      });
      const onDeath = (cause: unknown) => {
        if (!started) {
          started = true;
          clearTimeout(timer);
          rejectStart(cause instanceof Error ? cause : new Error(`inference worker exited during start-up (${String(cause)})`));
          return;
        }
        if (!slot.alive) return;
        slot.alive = false;
        const job = slot.job;
        slot.job = undefined;
        job?.reject(new Error("The inference worker stopped unexpectedly.", { cause }));
        if (closed) return;
        // Replace the dead worker; until it is ready the pool runs one short. A replacement
        // that fails to start is retried with a doubling delay (at most 30 s) until one starts.
        const i = slots.indexOf(slot);
        const replace = (delayMs: number) =>
          start().then(
            (fresh) => {
              if (closed) return void fresh.worker.terminate();
              if (i >= 0) slots[i] = fresh;
              notifyIdle();
            },
            () => {
              if (!closed) setTimeout(() => replace(Math.min(30_000, delayMs * 2)), delayMs).unref();
            },
          );
        void replace(options.restartDelayMs ?? 1000);
      };
      worker.on("error", onDeath);
      worker.on("exit", (code) => onDeath(new Error(`worker exited with code ${code}`)));
    });
  }

  const started = await Promise.allSettled(Array.from({ length: size }, () => start()));
  for (const s of started) if (s.status === "fulfilled") slots.push(s.value);
  const failure = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failure) {
    closed = true;
    await Promise.all(slots.map((s) => s.worker.terminate()));
    throw failure.reason;
  }

  return {
    get model() {
      return model;
    },
    idleCount: () => slots.filter((s) => s.alive && !s.busy).length,
    onIdle: (cb) => void idleCallbacks.push(cb),
    run(bytes) {
      const slot = slots.find((s) => s.alive && !s.busy);
      if (!slot) return Promise.reject(new Error("no idle inference worker"));
      if (closed) return Promise.reject(new Error("The analyzer is closed."));
      slot.busy = true;
      const id = nextId++;
      // A private copy, transferred: the caller's buffer may be a slice of a larger pool.
      const copy = new Uint8Array(bytes);
      return new Promise<JobOutcome>((resolve, reject) => {
        slot.job = { id, resolve, reject };
        slot.worker.postMessage({ type: "job", id, bytes: copy }, [copy.buffer]);
      });
    },
    async close() {
      closed = true;
      await Promise.all(
        slots.map(async (s) => {
          const job = s.job;
          s.job = undefined;
          s.alive = false;
          await s.worker.terminate();
          job?.reject(new Error("The analyzer is closed."));
        }),
      );
    },
  };
}
