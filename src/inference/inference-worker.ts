/**
 * Worker-process entry of the analyzer pool: waits for its start-up data, loads its own models
 * (line model and hand landmarker), then runs the whole per-image pipeline ({@link analyzeImage}) for each job it is sent, one at a time. onnxruntime's `session.run`
 * and the pixel loops block this process, never the server's event loop. It exits when the
 * parent goes (the IPC channel closes), so a killed server leaves no worker behind.
 */
import sharp from "sharp";
import { isImageError } from "../engine-errors.js";
import type { ImageOutput } from "./analyzer-types.js";
import { analyzeImage, createPipelineEngine, type PipelineEngineHandle } from "./pipeline.js";
import type { WorkerData, WorkerReply, WorkerRequest } from "./worker-protocol.js";

if (!process.send) throw new Error("inference-worker.ts must run as a child process with an IPC channel");

// Every image is processed once: libvips' operation cache would only hold memory.
sharp.cache(false);

function send(reply: WorkerReply): void {
  process.send!(reply);
}

let engine: PipelineEngineHandle | undefined;
let data: WorkerData | undefined;

async function start(init: WorkerData): Promise<void> {
  data = init;
  if (init.sharpConcurrency > 0) sharp.concurrency(init.sharpConcurrency);
  try {
    engine = await createPipelineEngine({ modelPath: init.modelPath, intraOpNumThreads: init.intraOpNumThreads });
    send({ type: "ready", model: engine.lines.metadata.model });
  } catch (e) {
    const err = e as Error;
    send({ type: "init-error", name: err?.name ?? "Error", message: err?.message ?? String(e) });
  }
}

async function job(id: number, bytes: Uint8Array, images: ImageOutput | undefined): Promise<void> {
  try {
    const { result, timings } = await analyzeImage(bytes, engine!, { ...data!.pipeline, images });
    send({ type: "result", id, result, timings });
  } catch (e) {
    const err = e as Error;
    send({
      type: "error",
      id,
      error: {
        imageCode: isImageError(e) ? e.code : undefined,
        name: err?.name ?? "Error",
        message: err?.message ?? String(e),
        stack: err?.stack,
      },
    });
  }
}

process.on("message", (msg: WorkerRequest) => {
  if (msg.type === "init") void start(msg.data);
  else if (msg.type === "job" && engine) void job(msg.id, msg.bytes, msg.images);
});
process.on("disconnect", () => process.exit(0));
