/**
 * Model session: loads the palm-lines ONNX model once, validates its metadata and shape,
 * warms it up, and runs it. `run` blocks the calling thread inside onnxruntime, so the
 * analyzer only calls it from its worker processes.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import * as ort from "onnxruntime-node";
import { PACKAGE_ROOT } from "../package-root.js";
import { ModelMetadataError, parseModelMetadata, readOnnxMetadataProps, type ModelMetadata } from "./model-metadata.js";

/** DEFAULT_MODEL_PATH is `models/palm-lines/palm-lines.onnx`, resolved relative to the repository root. */
export const DEFAULT_MODEL_PATH = join(PACKAGE_ROOT, "models/palm-lines/palm-lines.onnx");

/** ModelLoadError is thrown at start-up when the model file is missing, malformed or lacks metadata. */
export class ModelLoadError extends Error {
  override name = "ModelLoadError";
}

/** ModelSessionOptions configure {@link createModelSession}. */
export interface ModelSessionOptions {
  /** Path of the ONNX file. Default {@link DEFAULT_MODEL_PATH}. */
  modelPath?: string;
  /** onnxruntime intra-op threads for this session. Default 1 (one session per worker process). */
  intraOpNumThreads?: number;
  /** Run one inference on a zero tensor after loading so that the first request is not slow. Default true. */
  warmUp?: boolean;
}

/** ModelSession is one loaded model. */
export interface ModelSession {
  readonly metadata: ModelMetadata;
  /**
   * run infers one [1,3,S,S] float32 tensor (planar, normalised) and returns the
   * [1,4,S,S] probabilities, planar per output channel. Blocks the thread.
   */
  run(input: Float32Array): Promise<Float32Array>;
  /** release frees the native session. */
  release(): Promise<void>;
}

/**
 * loadModelMetadata reads and validates the metadata of the ONNX file at `modelPath` without
 * creating a session (cheap; used to fail start-up early with a clear message).
 * Throws {@link ModelLoadError}.
 */
export async function loadModelMetadata(modelPath: string = DEFAULT_MODEL_PATH): Promise<{ bytes: Uint8Array; metadata: ModelMetadata }> {
  let bytes: Uint8Array;
  try {
    bytes = await readFile(modelPath);
  } catch (cause) {
    throw new ModelLoadError(`Cannot read the model file ${modelPath}: ${(cause as Error).message}`, { cause });
  }
  try {
    return { bytes, metadata: parseModelMetadata(readOnnxMetadataProps(bytes)) };
  } catch (cause) {
    const why = cause instanceof ModelMetadataError ? cause.message : String(cause);
    throw new ModelLoadError(`The model file ${modelPath} is not a usable palm-lines ONNX model: ${why}`, { cause });
  }
}

/**
 * createModelSession loads the model, checks that it takes [1,3,S,S] and gives [1,4,S,S]
 * (S from the metadata), and warms it up. Throws {@link ModelLoadError} with a clear message.
 */
export async function createModelSession(options: ModelSessionOptions = {}): Promise<ModelSession> {
  const modelPath = options.modelPath ?? DEFAULT_MODEL_PATH;
  const { bytes, metadata } = await loadModelMetadata(modelPath);
  let session: ort.InferenceSession;
  try {
    session = await ort.InferenceSession.create(bytes, {
      intraOpNumThreads: options.intraOpNumThreads ?? 1,
      interOpNumThreads: 1,
      executionMode: "sequential",
      graphOptimizationLevel: "all",
      // Activation memory: one allocation per activation, reused from glibc's heap, instead of
      // a fresh 34 MB block mapped and faulted in at every run (docs/decisions/onnxruntime-no-mem-pattern.md).
      enableCpuMemArena: false,
      enableMemPattern: false,
      // Several sessions share the cores: idle intra-op threads must sleep, not spin.
      extra: { session: { intra_op: { allow_spinning: "0" } } },
    });
  } catch (cause) {
    throw new ModelLoadError(`onnxruntime cannot load the model file ${modelPath}: ${(cause as Error).message}`, { cause });
  }
  const inputName = session.inputNames.includes("image") ? "image" : session.inputNames[0];
  const outputName = session.outputNames.includes("probs") ? "probs" : session.outputNames[0];
  const S = metadata.inputSize;

  async function run(input: Float32Array): Promise<Float32Array> {
    const tensor = new ort.Tensor("float32", input, [1, 3, S, S]);
    const out = await session.run({ [inputName]: tensor });
    const probs = out[outputName];
    const dims = probs.dims;
    if (probs.type !== "float32" || dims.length !== 4 || dims[0] !== 1 || dims[1] !== 4 || dims[2] !== S || dims[3] !== S) {
      throw new ModelLoadError(`The model output ${outputName} is ${probs.type}[${dims.join(",")}], expected float32[1,4,${S},${S}]`);
    }
    return probs.data as Float32Array;
  }

  if (options.warmUp ?? true) {
    try {
      await run(new Float32Array(3 * S * S));
    } catch (cause) {
      await session.release().catch(() => {});
      if (cause instanceof ModelLoadError) throw cause;
      throw new ModelLoadError(`The model file ${modelPath} failed its warm-up inference: ${(cause as Error).message}`, { cause });
    }
  }
  return { metadata, run, release: () => session.release() };
}
