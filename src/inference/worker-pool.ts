/**
 * A fixed pool of inference worker processes, each running one job at a time (started with
 * ../worker-process.ts: compiled from dist/, TypeScript under tsx and vitest). Processes rather
 * than threads: each worker's libvips, libuv and V8 helper threads are its own, so the launcher
 * can schedule a worker as a whole (../launch/os-tuning.ts, told of the workers through
 * {@link WorkerPoolObserver}), and a worker killed in the middle of a native call takes nothing
 * else with it.
 */
import type { ChildProcess } from "node:child_process";
import { ImageError } from "../image/image-error.js";
import { siblingModuleUrl } from "../worker-thread.js";
import { spawnWorkerProcess } from "../worker-process.js";
import type { AnalysisResult } from "./analyzer-types.js";
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
  /** Told of the workers as they start and take or finish jobs; default none. */
  observer?: WorkerPoolObserver;
}

/** PoolWorker is one live worker as the pool reports it: its slot (stable across replacements), pid and whether it runs a job. */
export interface PoolWorker {
  readonly slot: number;
  readonly pid: number;
  readonly busy: boolean;
}

/**
 * WorkerPoolObserver is the pool's only hook for what runs around it (the launcher's OS tuning).
 * Its calls are synchronous and must not throw.
 */
export interface WorkerPoolObserver {
  /** A worker process was just started (its model not loaded yet); replacements included. */
  started?(pid: number): void;
  /** The live workers, after any of them became ready, took or finished a job, or died. */
  changed?(workers: readonly PoolWorker[]): void;
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
   * (test/unit/inference/worker-pool.spec.ts, "kills the worker of a cancelled job").
   */
  run(bytes: Uint8Array, options?: { signal?: AbortSignal }): Promise<JobOutcome>;
  /** onIdle registers a callback for when a worker becomes idle. */
  onIdle(callback: () => void): void;
  /** close stops every worker; running jobs reject. */
  close(): Promise<void>;
}

interface Slot {
  worker: ChildProcess;
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

function stopProcess(worker: ChildProcess, signal: NodeJS.Signals = "SIGTERM"): Promise<void> {
  if (worker.exitCode !== null || worker.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    worker.once("exit", () => resolve());
    worker.kill(signal);
  });
}

/**
 * createWorkerPool starts `size` workers and resolves once every one has loaded its model,
 * or rejects with the first start-up error (all workers are then stopped). A worker that
 * dies later is replaced (retried until a replacement starts); its job rejects.
 */
export async function createWorkerPool(options: WorkerPoolOptions): Promise<WorkerPool> {
  const size = Math.max(1, Math.floor(options.size));
  const slots: Slot[] = [];
  const idleCallbacks: Array<() => void> = [];
  let closed = false;
  let nextId = 1;
  let model = "";

  const observer = options.observer ?? {};

  /** Tells the observer the live workers and which run a job. */
  function report(): void {
    if (!observer.changed || closed) return;
    const workers: PoolWorker[] = [];
    slots.forEach((s, slot) => {
      if (s.alive && s.worker.pid) workers.push({ slot, pid: s.worker.pid, busy: s.job !== undefined });
    });
    observer.changed(workers);
  }

  function notifyIdle(): void {
    report();
    for (const cb of idleCallbacks) cb();
  }

  function start(): Promise<Slot> {
    return new Promise((resolveStart, rejectStart) => {
      const worker = (options.spawn ?? spawnWorkerProcess)(siblingModuleUrl(import.meta.url, "inference-worker"));
      if (worker.pid) observer.started?.(worker.pid);
      const slot: Slot = { worker, busy: true, alive: false };
      let started = false;
      const timer = setTimeout(() => {
        if (!started) {
          started = true;
          void stopProcess(worker, "SIGKILL");
          rejectStart(new Error(`inference worker did not start within ${options.startTimeoutMs ?? 120_000} ms`));
        }
      }, options.startTimeoutMs ?? 120_000);
      worker.on("message", (msg: WorkerReply) => {
        switch (msg.type) {
          case "ready":
            if (started) return;
            started = true;
            clearTimeout(timer);
            model = msg.model;
            slot.alive = true;
            slot.busy = false;
            resolveStart(slot);
            return;
          case "init-error": {
            if (started) return;
            started = true;
            clearTimeout(timer);
            void stopProcess(worker);
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
        report();
        // Replace the dead worker; until it is ready the pool runs one short. A replacement
        // that fails to start is retried with a doubling delay (at most 30 s) until one starts.
        const i = slots.indexOf(slot);
        const replace = (delayMs: number) =>
          start().then(
            (fresh) => {
              if (closed) return void stopProcess(fresh.worker);
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
      worker.on("exit", (code, signal) => onDeath(new Error(`worker exited with ${signal ?? `code ${code}`}`)));
      const init: WorkerRequest = { type: "init", data: options.workerData };
      worker.send(init, (err) => err && onDeath(err));
    });
  }

  const started = await Promise.allSettled(Array.from({ length: size }, () => start()));
  for (const s of started) if (s.status === "fulfilled") slots.push(s.value);
  const failure = started.find((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failure) {
    closed = true;
    await Promise.all(slots.map((s) => stopProcess(s.worker)));
    throw failure.reason;
  }
  report();

  return {
    get model() {
      return model;
    },
    idleCount: () => slots.filter((s) => s.alive && !s.busy).length,
    pids: () => slots.filter((s) => s.alive && s.worker.pid).map((s) => s.worker.pid!),
    onIdle: (cb) => void idleCallbacks.push(cb),
    run(bytes, runOptions = {}) {
      const slot = slots.find((s) => s.alive && !s.busy);
      if (!slot) return Promise.reject(new Error("no idle inference worker"));
      if (closed) return Promise.reject(new Error("The analyzer is closed."));
      const signal = runOptions.signal;
      if (signal?.aborted) return Promise.reject(signal.reason);
      slot.busy = true;
      const id = nextId++;
      return new Promise<JobOutcome>((resolve, reject) => {
        const onAbort = () => {
          if (slot.job?.id !== id) return;
          slot.job = undefined;
          reject(signal!.reason);
          // The slot stays busy until the process is gone; its exit brings a replacement.
          slot.worker.kill("SIGKILL");
        };
        const settle = <T>(fn: (v: T) => void) => (v: T) => {
          signal?.removeEventListener("abort", onAbort);
          fn(v);
        };
        slot.job = { id, resolve: settle(resolve), reject: settle(reject) };
        signal?.addEventListener("abort", onAbort, { once: true });
        // Serialised into the channel: the caller keeps its buffer.
        const job: WorkerRequest = { type: "job", id, bytes };
        slot.worker.send(job, (err) => {
          if (err && slot.job?.id === id) {
            slot.job = undefined;
            signal?.removeEventListener("abort", onAbort);
            reject(new Error("The inference worker stopped unexpectedly.", { cause: err }));
            // A worker that cannot be written to is of no further use: its exit brings a replacement.
            slot.worker.kill("SIGKILL");
          }
        });
        report();
      });
    },
    async close() {
      closed = true;
      await Promise.all(
        slots.map(async (s) => {
          const job = s.job;
          s.job = undefined;
          s.alive = false;
          await stopProcess(s.worker);
          job?.reject(new Error("The analyzer is closed."));
        }),
      );
    },
  };
}
