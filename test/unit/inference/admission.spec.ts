/**
 * The admission queue's fairness and deadline rule, with the real engine (one worker).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DeadlineTooShortError, OverloadedError } from "../../../src/engine-errors.js";
import { createAnalyzer, type EngineAnalyzer } from "../../../src/inference/analyzer.js";
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
