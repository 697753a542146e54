import { existsSync } from "node:fs";
import os from "node:os";
import { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { startThreadPriority, type ThreadPriority } from "../../../src/launch/thread-priority.js";

/** A worker that reports its own thread id (Linux) and stays alive until terminated. */
const TID_WORKER = `
const { parentPort } = require("node:worker_threads");
const { readlinkSync } = require("node:fs");
parentPort.postMessage(Number(readlinkSync("/proc/thread-self").split("/").pop()));
setInterval(() => {}, 1000);
`;

async function startWorker(): Promise<{ worker: Worker; tid: number }> {
  const worker = new Worker(TID_WORKER, { eval: true });
  const tid = await new Promise<number>((resolve) => worker.once("message", resolve));
  return { worker, tid };
}

describe.runIf(existsSync("/proc/thread-self"))("thread priority", () => {
  const cleanup: (() => unknown)[] = [];
  afterEach(async () => {
    for (const c of cleanup.splice(0)) await c();
  });

  it("lowers the priority of threads started later, never of the main thread or those alive before", async () => {
    const before = await startWorker();
    cleanup.push(() => before.worker.terminate());
    const priority: ThreadPriority = startThreadPriority(10, 60_000);
    cleanup.push(() => priority.stop());
    const later = await startWorker();
    cleanup.push(() => later.worker.terminate());

    expect(priority.sweep()).toBeGreaterThanOrEqual(1);
    expect(os.getPriority(later.tid)).toBe(10);
    expect(os.getPriority(before.tid)).toBe(0);
    expect(os.getPriority(process.pid)).toBe(0);
    expect(priority.sweep()).toBe(0); // nothing new since
  });

  it("does nothing with nice 0", async () => {
    const priority = startThreadPriority(0);
    const later = await startWorker();
    cleanup.push(() => later.worker.terminate());
    expect(priority.sweep()).toBe(0);
    expect(os.getPriority(later.tid)).toBe(0);
  });
});
