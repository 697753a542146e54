/**
 * The admission queue's fairness and deadline rule, with the real engine (one worker).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeadlineTooShortError, OverloadedError } from "../../../src/engine-errors.js";
import { AdmissionQueue } from "../../../src/inference/admission.js";
import { noStageTimings } from "../../../src/inference/pipeline.js";
import { createAnalyzer, type EngineAnalyzer } from "../../../src/inference/analyzer.js";
import type { AnalysisResult } from "../../../src/inference/analyzer-types.js";
import type { JobOutcome, WorkerPool } from "../../../src/inference/worker-pool.js";
import { makeImage } from "../../helpers/images.js";

let analyzer: EngineAnalyzer;
let small: Buffer;
let large: Buffer;
beforeAll(async () => {
  [analyzer, small, large] = await Promise.all([
    createAnalyzer({ workers: 1, maxQueue: 3 }),
    makeImage(256, 256, "jpeg"),
    makeImage(2000, 1500, "jpeg"),
  ]);
});
afterAll(async () => {
  await analyzer?.close();
});

/** settleOrder runs the analyses and resolves with their labels in the order they settled. */
function track(order: string[], label: string, p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => order.push(label),
    (e: unknown) => {
      order.push(`${label}:${(e as Error).name}`);
    },
  );
}

describe("AdmissionQueue", () => {
  it("gives a newcomer the place of the client with the longest backlog, and serves clients in turn", async () => {
    const order: string[] = [];
    // Client a fills the worker and the whole queue.
    const a = [1, 2, 3, 4].map((i) => track(order, `a${i}`, analyzer.analyze(small, { clientId: "a" })));
    // b arrives to a full replica: a's newest waiting analysis makes room for it.
    const b = track(order, "b1", analyzer.analyze(small, { clientId: "b" }));
    await Promise.all([...a, b]);
    expect(order).toContain("a4:OverloadedError");
    // b is served right after a's running analysis, ahead of a's backlog.
    expect(order.filter((l) => !l.includes(":"))).toEqual(["a1", "b1", "a2", "a3"]);
  });

  it("still refuses a client that already holds as many waiting places as anyone", async () => {
    const a = [1, 2, 3, 4].map(() => analyzer.analyze(small, { clientId: "a" }).catch((e: unknown) => e));
    const again = await analyzer.analyze(small, { clientId: "a" }).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(OverloadedError);
    await Promise.all(a);
  });

  it("refuses before it starts an analysis whose deadline is sooner than the fastest recent one, and runs it with time enough", async () => {
    await analyzer.analyze(small); // one finished analysis to know the time by
    await new Promise((r) => setImmediate(r));
    const refused = analyzer.analyze(large, { deadline: Date.now() + 1 }).catch((e: unknown) => e);
    expect(analyzer.stats()).toMatchObject({ running: 0, queued: 0 }); // nothing ran or queued
    expect(await refused).toBeInstanceOf(DeadlineTooShortError);
    await expect(analyzer.analyze(large, { deadline: Date.now() + 60_000 })).resolves.toMatchObject({ width: 2000 });
  });
});

/**
 * scriptedPool is a one-worker pool whose analyses take `timing.ms` (a timer) and report
 * `timing.decodeMs` of decoding: the deadline rule's arithmetic checked apart from this machine's
 * speed. A job whose signal aborts rejects at once, as the real pool does.
 */
function scriptedPool(timing: { ms: number; decodeMs: number }): WorkerPool {
  let busy = false;
  const idle: Array<() => void> = [];
  return {
    model: "scripted",
    idleCount: () => (busy ? 0 : 1),
    pids: () => [],
    onIdle: (cb) => void idle.push(cb),
    close: async () => {},
    run(_bytes, options = {}) {
      busy = true;
      const { ms, decodeMs } = timing;
      return new Promise<JobOutcome>((resolve, reject) => {
        const done = () => {
          busy = false;
          setImmediate(() => {
            for (const cb of idle) cb();
          });
        };
        const timer = setTimeout(() => {
          done();
          const timings = { ...noStageTimings(), decode: decodeMs, total: ms };
          resolve({ result: { width: 1000, height: 1000 } as AnalysisResult, timings });
        }, ms);
        options.signal?.addEventListener("abort", () => {
          clearTimeout(timer);
          done();
          reject(options.signal?.reason);
        });
      });
    },
  };
}

describe("AdmissionQueue deadline rule", () => {
  const megapixel = 1_000_000;
  const bytes = () => new Uint8Array(1);

  it("expects an image far larger than any seen to take its decode time per pixel, not what a small one took", async () => {
    // 1 MP analyses take 30 ms, 10 of them decoding: 40 MP cannot take less than 20 + 40 x 10 ms.
    const queue = new AdmissionQueue(scriptedPool({ ms: 30, decodeMs: 10 }), 1, 0);
    await queue.submit(bytes(), { pixels: megapixel });
    const refused = await queue.submit(bytes(), { pixels: 40 * megapixel, deadline: Date.now() + 200 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DeadlineTooShortError);
    expect((refused as DeadlineTooShortError).expectedMs).toBeGreaterThanOrEqual(400);
    expect(queue.running).toBe(0);
    // With time enough it runs.
    await expect(queue.submit(bytes(), { pixels: 40 * megapixel, deadline: Date.now() + 5000 })).resolves.toMatchObject({ width: 1000 });
  });

  it("remembers a large analysis stopped by its deadline through any number of small ones", async () => {
    const timing = { ms: 5000, decodeMs: 0 };
    const queue = new AdmissionQueue(scriptedPool(timing), 1, 0);
    // A 40 MP analysis runs 300 ms until its deadline stops it.
    const stopped = queue.submit(bytes(), { pixels: 40 * megapixel, signal: AbortSignal.timeout(300), deadline: Date.now() + 300 });
    await expect(stopped).rejects.toBeDefined();
    // Then small analyses of 5 ms that tell nothing of the pixel count's cost, more than the rule remembers.
    timing.ms = 5;
    for (let i = 0; i < 40; i++) await queue.submit(bytes(), { pixels: megapixel / 100 });
    const refused = await queue.submit(bytes(), { pixels: 40 * megapixel, deadline: Date.now() + 200 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DeadlineTooShortError);
    // A small one with that deadline runs.
    await expect(queue.submit(bytes(), { pixels: megapixel / 100, deadline: Date.now() + 200 })).resolves.toBeDefined();
  }, 20_000);
});
