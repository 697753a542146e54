/**
 * The floor: the engine's own per-image code run in-process, stage by stage, with the same
 * settings as one analysis worker (one onnxruntime intra-op thread per session on a machine with
 * a worker per core, sharp's cache off). No HTTP, JSON, base64, worker hand-over or queueing.
 */
import sharp from "sharp";
import { decodeImage } from "../src/image/decode.js";
import { preprocessLetterbox } from "../src/image/preprocess.js";
import { analyzeImage, createPipelineEngine, tensorSpec, type StageTimings } from "../src/inference/pipeline.js";
import { median } from "./stats.js";
import type { Workload } from "./workloads.js";

/** FloorResult is the median milliseconds of each stage of one workload. */
export interface FloorResult {
  workload: string;
  iterations: number;
  /** sharp decode at full size (header checks, EXIF orientation, to 8-bit RGB). */
  decode: number;
  /** Resize of the whole image to the model input (letterbox) and tensor conversion. */
  resize: number;
  /** One ONNX inference pass. */
  inferOnePass: number;
  /** The engine's inference time per image (one pass without a palm, two with one). */
  inferEngine: number;
  /** Passes the engine ran (inferEngine / inferOnePass, rounded). */
  passes: number;
  /** Post-processing (palm box, line selection, full-size mask rendering). */
  postprocess: number;
  /** The three mask PNG encodes together. */
  maskEncode: number;
  /** Overlay blend and JPEG encode. */
  overlayEncode: number;
  /** Whole analyzeImage(), the floor of one request. */
  total: number;
  /** CPU cores busy during analyzeImage() (process CPU time / wall time): above 1 where sharp's threads overlap. */
  cores: number;
  /** Lines detected in the last run (so a reader knows which path the image took). */
  detected: string[];
}

/** FloorOptions configure {@link measureFloor}. */
export interface FloorOptions {
  iterations: number;
  /** onnxruntime intra-op threads, as one worker uses. Default 1. */
  intraOpNumThreads?: number;
}

/** measureFloor loads one model session and measures every workload. */
export async function measureFloor(workloads: readonly Workload[], options: FloorOptions): Promise<FloorResult[]> {
  sharp.cache(false); // as inference-worker.ts
  const engine = await createPipelineEngine({ intraOpNumThreads: options.intraOpNumThreads ?? 1 });
  const session = engine.lines;
  const spec = tensorSpec(session.metadata);
  const results: FloorResult[] = [];
  try {
    for (const w of workloads) {
      const samples: Record<string, number[]> = {};
      const add = (k: string, v: number) => (samples[k] ??= []).push(v);
      let detected: string[] = [];
      // One untimed round first (page cache, lazy allocations).
      await analyzeImage(w.bytes, engine);
      for (let i = 0; i < options.iterations; i++) {
        let t = performance.now();
        const image = await decodeImage(w.bytes);
        add("decode", performance.now() - t);
        t = performance.now();
        const pre = await preprocessLetterbox(image, spec);
        add("resize", performance.now() - t);
        t = performance.now();
        await session.run(pre.tensor);
        add("infer", performance.now() - t);
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        const { result, timings } = await analyzeImage(w.bytes, engine);
        const cpu = process.cpuUsage(cpu0);
        add("cores", (cpu.user + cpu.system) / 1000 / (performance.now() - t0));
        for (const k of Object.keys(timings) as (keyof StageTimings)[]) add(`engine.${k}`, timings[k]);
        detected = Object.entries(result.stats)
          .filter(([, s]) => s.detected)
          .map(([n]) => n);
      }
      const m = (k: string) => median(samples[k]);
      results.push({
        workload: w.name,
        iterations: options.iterations,
        decode: m("decode"),
        resize: m("resize"),
        inferOnePass: m("infer"),
        inferEngine: m("engine.inference"),
        passes: Math.max(1, Math.round(m("engine.inference") / m("infer"))),
        postprocess: m("engine.postprocess"),
        maskEncode: m("engine.maskEncode"),
        overlayEncode: m("engine.overlayEncode"),
        total: m("engine.total"),
        cores: m("cores"),
        detected,
      });
    }
  } finally {
    await engine.close();
  }
  return results;
}
