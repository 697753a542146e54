/**
 * The floor: the engine's own per-image code run in-process, stage by stage, with the same
 * settings as one analysis worker (one onnxruntime intra-op thread per session on a machine with
 * a worker per core, sharp's cache off). No HTTP, JSON, base64, worker hand-over or queueing.
 */
import sharp from "sharp";
import { analyzeImage, createPipelineEngine, type StageTimings } from "../src/inference/pipeline.js";
import { median } from "./stats.js";
import type { Workload } from "./workloads.js";

/** FloorResult is the median milliseconds of each stage of one workload (the engine's own timings). */
export interface FloorResult {
  workload: string;
  iterations: number;
  /** sharp decodes (header checks, EXIF orientation, to 8-bit RGB): a large JPEG's reduced copy plus the photo at full size. */
  decode: number;
  /** The hand search: the small copy and the landmark models. */
  landmarks: number;
  /** The canonical palm frame cut for the line model. */
  frame: number;
  /** The line model. */
  inference: number;
  /** Post-processing (line selection, tracing, mapping back onto the photo). */
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

/** measureFloor loads the engine once and measures every workload. */
export async function measureFloor(workloads: readonly Workload[], options: FloorOptions): Promise<FloorResult[]> {
  sharp.cache(false); // as inference-worker.ts
  const engine = await createPipelineEngine({ intraOpNumThreads: options.intraOpNumThreads ?? 1 });
  const results: FloorResult[] = [];
  try {
    for (const w of workloads) {
      const samples: Record<string, number[]> = {};
      const add = (k: string, v: number) => {
        samples[k] ??= [];
        samples[k].push(v);
      };
      let detected: string[] = [];
      // One untimed round first (page cache, lazy allocations).
      await analyzeImage(w.bytes, engine);
      for (let i = 0; i < options.iterations; i++) {
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        const { result, timings } = await analyzeImage(w.bytes, engine);
        const cpu = process.cpuUsage(cpu0);
        add("cores", (cpu.user + cpu.system) / 1000 / (performance.now() - t0));
        for (const k of Object.keys(timings) as (keyof StageTimings)[]) add(k, timings[k]);
        add("decodes", timings.decode + timings.fullDecode);
        detected = Object.entries(result.stats)
          .filter(([, s]) => s.detected)
          .map(([n]) => n);
      }
      const m = (k: string) => median(samples[k]);
      results.push({
        workload: w.name,
        iterations: options.iterations,
        decode: m("decodes"),
        landmarks: m("landmarks"),
        frame: m("preprocess"),
        inference: m("inference"),
        postprocess: m("postprocess"),
        maskEncode: m("maskEncode"),
        overlayEncode: m("overlayEncode"),
        total: m("total"),
        cores: m("cores"),
        detected,
      });
    }
  } finally {
    await engine.close();
  }
  return results;
}
