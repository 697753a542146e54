/**
 * Messages between the analyzer (server process) and its inference worker processes.
 */
import type { ImageErrorCode } from "../engine-errors.js";
import type { AnalysisResult, ImageOutput } from "./analyzer-types.js";
import type { PipelineOptions, StageTimings } from "./pipeline.js";

/** WorkerData is the start-up configuration of one inference worker (its first message). */
export interface WorkerData {
  modelPath: string;
  intraOpNumThreads: number;
  /** libvips threads (process-wide); 0 leaves sharp's default. */
  sharpConcurrency: number;
  pipeline: PipelineOptions;
}

/** WorkerRequest is the worker's start-up data, then a job: the compressed image bytes and the images to make. */
export type WorkerRequest = { type: "init"; data: WorkerData } | { type: "job"; id: number; bytes: Uint8Array; images?: ImageOutput };

/** WorkerError is a job failure, serialisable across threads. */
export interface WorkerError {
  /** Set when the input was at fault (an ImageError). */
  imageCode?: ImageErrorCode;
  name: string;
  message: string;
  stack?: string;
}

/** WorkerReply is a worker's answer: start-up outcome or a job outcome. */
export type WorkerReply =
  | { type: "ready"; model: string }
  | { type: "init-error"; name: string; message: string }
  | { type: "result"; id: number; result: AnalysisResult; timings: StageTimings }
  | { type: "error"; id: number; error: WorkerError };
