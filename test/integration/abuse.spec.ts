/**
 * Issue 29's findings, each as an attacker would try it against a real server and engine
 * (HTTP/1.1 fetch and Connect over HTTP/1.1), with a victim client measured alongside.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryStore } from "../../src/auth/memory-store.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { makeImage } from "../helpers/images.js";
import { registerKey } from "../helpers/keys.js";
import { postAnalyze } from "../helpers/rest.js";
import { startServer, type TestServer } from "../helpers/server.js";

let analyzer: EngineAnalyzer;
let victimBody: string;
let bigBody: string;
beforeAll(async () => {
  const [a, small, big] = await Promise.all([
    // As in the issue: one analysis worker and no queue.
    createTestAnalyzer({ workers: 1, maxQueue: 0 }),
    makeImage(640, 480, "jpeg"),
    makeImage(10_000, 4000, "png"),
  ]);
  analyzer = a;
  victimBody = JSON.stringify({ image: small.toString("base64") });
  bigBody = JSON.stringify({ image: big.toString("base64") });
}, 120_000);
afterAll(async () => {
  await analyzer?.close();
});

describe("finding 1: free work through short deadlines", () => {
  let srv: TestServer;
  afterAll(async () => {
    await srv?.close();
  });

  it("refuses at once an analysis its deadline cannot wait for, charges nothing, and the victim is served", async () => {
    const store = createMemoryStore();
    const attackerKey = await registerKey(store, "attacker", "five");
    const victimKey = await registerKey(store, "victim", "pro");
    srv = await startServer({ analyzer, store, config: { planLimits: { five: 5, pro: 10_000 } } });
    const attack = async () => {
      const res = await fetch(`${srv.url}/palm.v1.PalmService/Analyze`, {
        method: "POST",
        headers: { "content-type": "application/json", "connect-timeout-ms": "100", "x-api-key": attackerKey },
        body: bigBody,
      });
      return `${res.status} ${((await res.json()) as { code?: string }).code}`;
    };
    // The victim has been served before: the engine knows how long an analysis takes.
    expect((await postAnalyze(srv.url, victimBody, { "x-api-key": victimKey })).res.status).toBe(200);
    // A first analysis of the large image may run until its deadline stops it: from then on the
    // engine knows that one takes longer than that (admission.ts, expectedMs).
    expect((await attack()).split(" ")[0]).toBe("504");

    const until = Date.now() + 6000;
    const attacker = (async () => {
      const codes: string[] = [];
      while (Date.now() < until) codes.push(await attack());
      return codes;
    })();
    const victim = (async () => {
      const statuses: number[] = [];
      while (Date.now() < until) statuses.push((await postAnalyze(srv.url, victimBody, { "x-api-key": victimKey })).res.status);
      return statuses;
    })();
    const [attacks, served] = await Promise.all([attacker, victim]);
    expect(attacks.length).toBeGreaterThan(3);
    expect(new Set(attacks)).toEqual(new Set(["504 deadline_exceeded"]));
    expect(served.length).toBeGreaterThan(0);
    expect(served.filter((s) => s !== 200)).toEqual([]);
    expect(await store.usage("attacker", quotaPeriodOf())).toBe(0);
  }, 60_000);
});
