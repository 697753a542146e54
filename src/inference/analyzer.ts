/**
 * The analysis engine's entry point: {@link createAnalyzer} loads the model into a pool of
 * worker processes and admits analyses under a bound (running + queued), so that overload is
 * refused at once instead of growing memory or timing everyone out.
 */
import { availableParallelism } from "node:os";
import { checkImageFile, readImageHeader } from "../image/decode.js";
import { AdmissionQueue, abortReason } from "./admission.js";
import type { AnalysisResult, AnalyzeOptions, Analyzer } from "./analyzer-types.js";
import { DEFAULT_MODEL_PATH, ModelLoadError, loadModelMetadata } from "./model-session.js";
import type { PipelineOptions, StageTimings } from "./pipeline.js";
import { createWorkerPool, type WorkerPool } from "./worker-pool.js";

/** AnalyzerOptions configure {@link createAnalyzer}. Every field is optional. */
export interface AnalyzerOptions {
  /**
   * Path of the ONNX model. Default `models/palm-lines/palm-lines.onnx` in the repository
   * ({@link DEFAULT_MODEL_PATH}).
   */
  modelPath?: string;
  /**
   * Worker processes, each with its own model session, each running one analysis at a time.
   * Default `min(os.availableParallelism(), DEFAULT_MAX_WORKERS)`. Memory, measured on 2 cores:
   * about 155-165 MB RSS per worker process once warmed up (its own Node, sharp and
   * onnxruntime session, the shared libraries counted in each process's RSS), about 40 MB more
   * once it has run 12 MP photos (activation memory that glibc keeps for the next inference),
   * plus about 65 MB per running 12 MP analysis; more workers than cores only adds memory.
   */
  workers?: number;
  /**
   * Analyses running at once, at most `workers`. Default `workers`. Each running 12 MP
   * analysis holds about 60 MB of decoded pixels and buffers.
   */
  maxInFlight?: number;
  /**
   * Analyses waiting for a worker; beyond running + queued, `analyze()` throws
   * OverloadedError at once. Default 2 x `workers`. A queued analysis holds only its
   * compressed bytes.
   */
  maxQueue?: number;
  /**
   * onnxruntime intra-op threads per worker session. Default
   * max(1, floor(availableParallelism / workers)): 1 when there is a worker per core.
   */
  intraOpNumThreads?: number;
  /** Encoding options of the pipeline (overlay opacity, stroke, JPEG quality; mask zlib level). */
  pipeline?: PipelineOptions;
  /** Called after each analysis with its stage timings (for logs and benchmarks). */
  onTimings?: (timings: StageTimings) => void;
}

/**
 * DEFAULT_MAX_WORKERS caps the default worker count, so that 16 concurrent 12 MP requests
 * (4 running, 12 queued as compressed bytes) stay within 1.5 GB of RSS summed over the
 * processes. Estimated from the per-worker figures above: about 145 MB for the server process,
 * 200 MB per worker process and 65 MB per running analysis give 1.25 GB with 4 workers and
 * 1.8 GB with 6 (the cap while workers were threads). Measured only with 2 workers: 1.1 GB. On
 * bigger machines each worker's session gets more intra-op threads instead.
 */
export const DEFAULT_MAX_WORKERS = 4;

/** AnalyzerStats is a snapshot of the admission state. */
export interface AnalyzerStats {
  workers: number;
  running: number;
  queued: number;
  maxInFlight: number;
  maxQueue: number;
}

/** EngineAnalyzer is an {@link Analyzer} plus introspection for health and metrics. */
export interface EngineAnalyzer extends Analyzer {
  /** stats returns the current admission state. */
  stats(): AnalyzerStats;
  /** workerPids lists the worker processes (their memory is not this process's). */
  workerPids(): number[];
}

function positiveInt(value: number | undefined, fallback: number, name: string, min = 1): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < min) throw new RangeError(`AnalyzerOptions.${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

/**
 * createAnalyzer loads and validates the model (throws ModelLoadError with a clear message
 * when the file is missing, malformed or lacks metadata), starts the worker pool with the
 * model warmed up in every worker, and returns the {@link Analyzer}.
 *
 * Admission: at most `maxInFlight` analyses run and `maxQueue` wait; beyond that `analyze()`
 * rejects at once with OverloadedError (retry hint from the recent mean duration). Cheap
 * input checks (size, magic bytes) reject before admission. An aborted signal rejects a
 * queued analysis at once with the signal's reason and frees its place; a running one
 * rejects at once too, and its worker process is killed and replaced (worker-pool.ts), so that
 * work nobody waits for stops within a bounded time.
 */
export async function createAnalyzer(options: AnalyzerOptions = {}): Promise<EngineAnalyzer> {
  const cores = availableParallelism();
  const workers = positiveInt(options.workers, Math.min(cores, DEFAULT_MAX_WORKERS), "workers");
  const maxInFlight = Math.min(workers, positiveInt(options.maxInFlight, workers, "maxInFlight"));
  const maxQueue = positiveInt(options.maxQueue, 2 * workers, "maxQueue", 0);
  const intraOpNumThreads = positiveInt(options.intraOpNumThreads, Math.max(1, Math.floor(cores / workers)), "intraOpNumThreads");
  const modelPath = options.modelPath ?? DEFAULT_MODEL_PATH;

  // Validate on the main thread first: a clear start-up error, before spawning anything.
  await loadModelMetadata(modelPath);
  let pool: WorkerPool;
  try {
    pool = await createWorkerPool({
      size: workers,
      workerData: { modelPath, intraOpNumThreads, sharpConcurrency: 0, pipeline: options.pipeline ?? {} },
    });
  } catch (cause) {
    if (cause instanceof Error && cause.name === "ModelLoadError") throw new ModelLoadError(cause.message, { cause });
    throw new ModelLoadError(`The analysis workers could not start: ${(cause as Error)?.message ?? String(cause)}`, { cause });
  }

  const admission = new AdmissionQueue(pool, maxInFlight, maxQueue, options.onTimings);
  return {
    model: pool.model,
    stats: () => ({ workers, running: admission.running, queued: admission.queued, maxInFlight, maxQueue }),
    workerPids: () => pool.pids(),
    analyze(image: Uint8Array, callOptions: AnalyzeOptions = {}): Promise<AnalysisResult> {
      const signal = callOptions.signal;
      if (admission.closed) return Promise.reject(new Error("The analyzer is closed."));
      if (signal?.aborted) return Promise.reject(abortReason(signal));
      // Cheap checks before admission, so that junk never takes a place in the queue.
      let format: ReturnType<typeof checkImageFile>;
      try {
        format = checkImageFile(image);
      } catch (e) {
        return Promise.reject(e);
      }
      if (callOptions.deadline === undefined) return admission.submit(image, callOptions);
      // The header's pixel count sharpens the deadline rule (admission.ts); an unreadable header
      // is left to the worker, which answers it as before.
      const submit = (pixels?: number) => {
        if (signal?.aborted) return Promise.reject(abortReason(signal));
        if (admission.closed) return Promise.reject(new Error("The analyzer is closed."));
        return admission.submit(image, { ...callOptions, pixels });
      };
      return readImageHeader(image, format).then(
        (h) => submit(h.width * h.height),
        () => submit(),
      );
    },
    async close() {
      if (admission.closed) return;
      await admission.close();
      await pool.close();
    },
  };
}
