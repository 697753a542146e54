/**
 * Worker-thread entry of the analyzer pool: loads its own model session, then runs the whole
 * per-image pipeline ({@link analyzeImage}) for each job it is sent, one at a time.
 * onnxruntime's `session.run` and the pixel loops block this thread, never the main one.
 */
import { parentPort, workerData } from "node:worker_threads";
import sharp from "sharp";
import { isImageError } from "../image/image-error.js";
import { createModelSession } from "./model-session.js";
import { analyzeImage } from "./pipeline.js";
import type { WorkerData, WorkerReply, WorkerRequest } from "./worker-protocol.js";

const port = parentPort;
if (!port) throw new Error("inference-worker.ts must run in a worker thread");
const data = workerData as WorkerData;

// Every image is processed once: libvips' operation cache would only hold memory.
sharp.cache(false);
if (data.sharpConcurrency > 0) sharp.concurrency(data.sharpConcurrency);

function send(reply: WorkerReply): void {
  port!.postMessage(reply);
}

try {
  const session = await createModelSession({
    modelPath: data.modelPath,
    intraOpNumThreads: data.intraOpNumThreads,
  });
  port.on("message", async (msg: WorkerRequest) => {
    if (msg.type !== "job") return;
    try {
      const { result, timings } = await analyzeImage(msg.bytes, session, data.pipeline);
      send({ type: "result", id: msg.id, result, timings });
    } catch (e) {
      const err = e as Error;
      send({
        type: "error",
        id: msg.id,
        error: {
          imageCode: isImageError(e) ? e.code : undefined,
          name: err?.name ?? "Error",
          message: err?.message ?? String(e),
          stack: err?.stack,
        },
      });
    }
  });
  send({ type: "ready", model: session.metadata.model });
} catch (e) {
  const err = e as Error;
  send({ type: "init-error", name: err?.name ?? "Error", message: err?.message ?? String(e) });
}
