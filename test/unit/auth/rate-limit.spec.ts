import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../../../src/auth/memory-store.js";
import { createRateGate } from "../../../src/auth/rate-gate.js";
import { gcra, setRateLimitHeaders } from "../../../src/auth/rate-limit.js";
import type { Store } from "../../../src/auth/store.js";

describe("gcra()", () => {
  const limit = { rate: 2, burst: 3, concurrency: 1 };

  it("grants the burst at once, then one request per emission interval", () => {
    let tat: number | undefined;
    const now = 1_000_000;
    const steps = [];
    for (let i = 0; i < 4; i++) {
      const step = gcra(tat, now, limit);
      if (step.granted) tat = step.tat;
      steps.push([step.granted, step.remaining, step.retryAfterMs]);
    }
    expect(steps).toEqual([
      [true, 2, 0],
      [true, 1, 0],
      [true, 0, 0],
      [false, 0, 500],
    ]);
    expect(gcra(tat, now + 499, limit).granted).toBe(false);
    expect(gcra(tat, now + 500, limit)).toMatchObject({ granted: true, remaining: 0 });
  });

  it("is whole again after burst / rate seconds of quiet", () => {
    const first = gcra(undefined, 0, limit);
    expect(first.resetMs).toBe(500);
    expect(gcra(first.tat, 10_000, limit)).toMatchObject({ granted: true, remaining: 2, available: 3 });
  });
});

describe("setRateLimitHeaders()", () => {
  it("writes the IETF draft's RateLimit-Policy and RateLimit", () => {
    const h = new Headers();
    setRateLimitHeaders(
      h,
      { rate: 0.5, burst: 10, concurrency: 2 },
      { granted: true, remaining: 7, resetMs: 5_500, retryAfterMs: 0, inFlight: 1 },
    );
    expect(h.get("ratelimit-policy")).toBe('"burst";q=10;w=20');
    expect(h.get("ratelimit")).toBe('"burst";r=7;t=6');
  });
});

describe("createRateGate() limitOf()", () => {
  const config = { "*": { rate: 10, burst: 20, concurrency: 4 } };
  const stored = { rate: 1, burst: 2, concurrency: 1 };

  it("keeps the last stored plan setting, else the configuration, while the store cannot read it", async () => {
    const store = createMemoryStore();
    await store.setPlanRateLimit("five", stored);
    let down = false;
    const flaky: Store = Object.assign(Object.create(store), {
      getPlanRateLimit: (plan: string) => (down ? Promise.reject(new Error("node lost")) : store.getPlanRateLimit(plan)),
    });
    const gate = createRateGate({ store: flaky, limits: config, planCacheMs: 0 });
    expect(await gate.limitOf("five")).toEqual(stored);
    down = true;
    expect(await gate.limitOf("five")).toEqual(stored);
    // A plan never read before: the configuration, not a failed request for every client of the plan.
    expect(await gate.limitOf("other")).toEqual(config["*"]);
  });
});
