/**
 * One behavioural suite for every {@link Store} implementation: run by
 * test/unit/auth/memory-store.spec.ts and test/integration/redis-store.spec.ts.
 */
import { describe, expect, it } from "vitest";
import { hashApiKey, generateApiKey } from "../../src/auth/api-key.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import type { Store } from "../../src/auth/store.js";

/** LEASE: a lease no test outlives (ms). */
const LEASE = 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** describeStore defines the suite; `open` returns a fresh, empty store for each test. */
export function describeStore(name: string, open: () => Promise<Store>): void {
  // Periods around now: a counter of a long-past month has expired (and is swept) by design.
  const period = quotaPeriodOf();
  const nextPeriod = quotaPeriodOf(new Date(period.resetsAt * 1000));

  describe(name, () => {
    it("resolves nothing for an unknown key hash", async () => {
      const store = await open();
      expect(await store.findKey(hashApiKey(generateApiKey()))).toBeUndefined();
    });

    it("creates a new client on plan free when no plan is given", async () => {
      const store = await open();
      const hash = hashApiKey(generateApiKey());
      const rec = await store.createKey("acme", hash);
      expect(rec).toMatchObject({ hash, clientId: "acme" });
      expect(await store.findKey(hash)).toEqual({ clientId: "acme", plan: "free" });
    });

    it("keeps the client's plan for a second key and changes it with setPlan", async () => {
      const store = await open();
      const a = hashApiKey(generateApiKey());
      const b = hashApiKey(generateApiKey());
      await store.createKey("acme", a, "starter");
      await store.createKey("acme", b);
      expect(await store.findKey(b)).toEqual({ clientId: "acme", plan: "starter" });
      await store.setPlan("acme", "pro");
      expect(await store.findKey(a)).toEqual({ clientId: "acme", plan: "pro" });
      expect((await store.getClient("acme"))?.plan).toBe("pro");
      expect(await store.getClient("nobody")).toBeUndefined();
    });

    it("stops resolving a revoked key and lists it as revoked", async () => {
      const store = await open();
      const a = hashApiKey(generateApiKey());
      const b = hashApiKey(generateApiKey());
      await store.createKey("acme", a, "free");
      await store.createKey("acme", b, "free");
      expect(await store.revokeKey(a)).toBe(true);
      expect(await store.findKey(a)).toBeUndefined();
      expect(await store.findKey(b)).toBeDefined();
      const list = await store.listKeys("acme");
      expect(list.map((k) => k.hash).sort()).toEqual([a, b].sort());
      expect(list.find((k) => k.hash === a)?.revokedAt).toBeTypeOf("number");
      expect(list.find((k) => k.hash === b)?.revokedAt).toBeUndefined();
    });

    it("answers false when revoking an unknown hash", async () => {
      const store = await open();
      expect(await store.revokeKey(hashApiKey(generateApiKey()))).toBe(false);
    });

    it("finds key hashes by prefix", async () => {
      const store = await open();
      const a = hashApiKey(generateApiKey());
      await store.createKey("acme", a, "free");
      expect(await store.findKeyHashes(a.slice(0, 10))).toEqual([a]);
    });

    it("grants reservations up to the limit, then refuses without counting", async () => {
      const store = await open();
      expect(await store.reserve("acme", period, 2, "r1", LEASE)).toEqual({ granted: true, used: 1 });
      expect(await store.reserve("acme", period, 2, "r2", LEASE)).toEqual({ granted: true, used: 2 });
      expect(await store.reserve("acme", period, 2, "r3", LEASE)).toEqual({ granted: false, used: 2 });
      expect(await store.usage("acme", period)).toBe(2);
    });

    it("counts a reservation id once however often it is reserved", async () => {
      const store = await open();
      expect(await store.reserve("acme", period, 5, "r1", LEASE)).toEqual({ granted: true, used: 1 });
      expect(await store.reserve("acme", period, 5, "r1", LEASE)).toEqual({ granted: true, used: 1 });
      expect(await store.usage("acme", period)).toBe(1);
    });

    it("releases only the pending unit named, once, and ignores unknown ones", async () => {
      const store = await open();
      await store.reserve("acme", period, 5, "r1", LEASE);
      await store.reserve("acme", period, 5, "r2", LEASE);
      expect(await store.release("acme", period, "never-reserved")).toBe(2);
      expect(await store.release("acme", period, "r1")).toBe(1);
      expect(await store.release("acme", period, "r1")).toBe(1);
      expect(await store.usage("acme", period)).toBe(1);
    });

    it("commits a pending unit at its own place, idempotently, and never releases a committed one", async () => {
      const store = await open();
      for (const id of ["r1", "r2", "r3"]) await store.reserve("acme", period, 5, id, LEASE);
      expect(await store.commit("acme", period, 5, "r2")).toEqual({ committed: true, place: 1, used: 3 });
      expect(await store.commit("acme", period, 5, "r1")).toEqual({ committed: true, place: 2, used: 3 });
      expect(await store.commit("acme", period, 5, "r2")).toEqual({ committed: true, place: 1, used: 3 });
      expect(await store.release("acme", period, "r2")).toBe(3);
      expect(await store.release("acme", period, "r3")).toBe(2);
      // A later unit's place follows the committed ones, whatever was released in between.
      await store.reserve("acme", period, 5, "r4", LEASE);
      expect(await store.commit("acme", period, 5, "r4")).toMatchObject({ committed: true, place: 3 });
      expect(await store.usage("acme", period)).toBe(3);
    });

    it("releases even a committed unit when asked to (a commit whose answer was lost, no 200 sent)", async () => {
      const store = await open();
      for (const id of ["r1", "r2"]) await store.reserve("acme", period, 5, id, LEASE);
      await store.commit("acme", period, 5, "r1");
      expect(await store.release("acme", period, "r1")).toBe(2);
      expect(await store.release("acme", period, "r1", { evenCommitted: true })).toBe(1);
      expect(await store.release("acme", period, "r2", { evenCommitted: true })).toBe(0);
      expect(await store.usage("acme", period)).toBe(0);
    });

    it("gives back a pending unit whose lease passed, and keeps one whose lease was renewed", async () => {
      const store = await open();
      await store.reserve("acme", period, 2, "dead", 300);
      await store.reserve("acme", period, 2, "alive", 300);
      expect(await store.reserve("acme", period, 2, "third", LEASE)).toEqual({ granted: false, used: 2 });
      await sleep(150);
      expect(await store.renew("acme", period, "alive", 600)).toBe(true);
      await sleep(250);
      expect(await store.usage("acme", period)).toBe(1);
      expect(await store.reserve("acme", period, 2, "third", LEASE)).toEqual({ granted: true, used: 2 });
      expect(await store.renew("acme", period, "dead", LEASE)).toBe(false);
      expect(await store.commit("acme", period, 2, "alive")).toEqual({ committed: true, place: 1, used: 2 });
      expect(await store.renew("acme", period, "alive", LEASE)).toBe(false);
    });

    it("commits a unit whose lease lapsed only while the count is under the limit", async () => {
      const store = await open();
      await store.reserve("acme", period, 1, "slow", 100);
      await sleep(150);
      expect(await store.commit("acme", period, 1, "slow")).toEqual({ committed: true, place: 1, used: 1 });
      await store.reserve("other", period, 1, "slow", 100);
      await sleep(150);
      await store.reserve("other", period, 1, "fast", LEASE);
      expect(await store.commit("other", period, 1, "slow")).toEqual({ committed: false, place: 0, used: 1 });
      expect(await store.usage("other", period)).toBe(1);
    });

    it("gives 40 concurrent commits 40 distinct places", async () => {
      const store = await open();
      const ids = Array.from({ length: 40 }, (_, i) => `r${i}`);
      await Promise.all(ids.map((id) => store.reserve("acme", period, 100, id, LEASE)));
      const commits = await Promise.all(ids.map((id) => store.commit("acme", period, 100, id)));
      expect(commits.map((c) => c.place).sort((a, b) => a - b)).toEqual(ids.map((_, i) => i + 1));
    });

    it("forgets a counter once its month plus the grace week is over", async () => {
      const store = await open();
      const longAgo = quotaPeriodOf(new Date("2020-03-15T12:00:00Z"));
      expect(await store.reserve("acme", longAgo, 5, "r1", LEASE)).toEqual({ granted: true, used: 1 });
      expect(await store.usage("acme", longAgo)).toBe(0);
    });

    it("counts each month and each client separately", async () => {
      const store = await open();
      await store.reserve("acme", period, 5, "r1", LEASE);
      await store.reserve("acme", nextPeriod, 5, "r2", LEASE);
      await store.reserve("acme", nextPeriod, 5, "r3", LEASE);
      await store.reserve("other", period, 5, "r4", LEASE);
      expect(await store.usage("acme", period)).toBe(1);
      expect(await store.usage("acme", nextPeriod)).toBe(2);
      expect(await store.usage("other", period)).toBe(1);
    });

    it("grants exactly the limit to 40 concurrent reservations against a limit of 15", async () => {
      const store = await open();
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => store.reserve("acme", period, 15, `r${i}`, LEASE)));
      expect(results.filter((r) => r.granted)).toHaveLength(15);
      expect(await store.usage("acme", period)).toBe(15);
    });
    describe("per-client limits (admit, leave)", () => {
      // A slow rate, so that no test earns a request back while it runs.
      const slow = { rate: 0.01, burst: 3, concurrency: 10 };

      it("grants the burst, then refuses by rate with the wait, and holds nothing for a refusal", async () => {
        const store = await open();
        const granted = [];
        for (const id of ["a1", "a2", "a3"]) granted.push(await store.admit("acme", slow, id, LEASE));
        expect(granted.map((d) => [d.granted, d.remaining, d.inFlight])).toEqual([
          [true, 2, 1],
          [true, 1, 2],
          [true, 0, 3],
        ]);
        const refused = await store.admit("acme", slow, "a4", LEASE);
        expect(refused).toMatchObject({ granted: false, limitedBy: "rate", remaining: 0, inFlight: 3 });
        // One request in 100 s: the fourth waits one emission interval (within a clock tick).
        expect(refused.retryAfterMs).toBeGreaterThan(99_000);
        expect(refused.retryAfterMs).toBeLessThanOrEqual(100_000);
        expect(await store.leave("acme", "a4")).toBe(3);
        // Another client has its own burst.
        expect(await store.admit("other", slow, "a1", LEASE)).toMatchObject({ granted: true, remaining: 2, inFlight: 1 });
      });

      it("refuses by concurrency without taking from the rate, and grants again once one leaves", async () => {
        const store = await open();
        const two = { rate: 0.01, burst: 5, concurrency: 2 };
        await store.admit("acme", two, "c1", LEASE);
        await store.admit("acme", two, "c2", LEASE);
        expect(await store.admit("acme", two, "c3", LEASE)).toMatchObject({
          granted: false,
          limitedBy: "concurrency",
          remaining: 3,
          inFlight: 2,
        });
        expect(await store.leave("acme", "c1")).toBe(1);
        expect(await store.leave("acme", "c1")).toBe(1);
        expect(await store.admit("acme", two, "c3", LEASE)).toMatchObject({ granted: true, remaining: 2, inFlight: 2 });
      });

      it("counts a request id once however often it is admitted", async () => {
        const store = await open();
        expect(await store.admit("acme", slow, "same", LEASE)).toMatchObject({ granted: true, remaining: 2, inFlight: 1 });
        expect(await store.admit("acme", slow, "same", LEASE)).toMatchObject({ granted: true, remaining: 2, inFlight: 1 });
      });

      it("earns requests back at the rate", async () => {
        const store = await open();
        const fast = { rate: 20, burst: 1, concurrency: 10 };
        expect((await store.admit("acme", fast, "e1", LEASE)).granted).toBe(true);
        expect(await store.admit("acme", fast, "e2", LEASE)).toMatchObject({ granted: false, limitedBy: "rate" });
        await sleep(80);
        expect((await store.admit("acme", fast, "e2", LEASE)).granted).toBe(true);
      });

      it("gives back a place whose lease passed, and keeps one whose lease was renewed", async () => {
        const store = await open();
        const one = { rate: 100, burst: 100, concurrency: 2 };
        await store.admit("acme", one, "dead", 300);
        await store.admit("acme", one, "alive", 300);
        expect((await store.admit("acme", one, "third", LEASE)).limitedBy).toBe("concurrency");
        await sleep(150);
        expect(await store.renewInFlight("acme", "alive", 600)).toBe(true);
        await sleep(250);
        expect(await store.admit("acme", one, "third", LEASE)).toMatchObject({ granted: true, inFlight: 2 });
        expect(await store.renewInFlight("acme", "dead", LEASE)).toBe(false);
      });

      it("grants exactly the concurrency to 40 concurrent requests", async () => {
        const store = await open();
        const limit = { rate: 1000, burst: 100, concurrency: 7 };
        const results = await Promise.all(Array.from({ length: 40 }, (_, i) => store.admit("acme", limit, `p${i}`, LEASE)));
        expect(results.filter((r) => r.granted)).toHaveLength(7);
      });

      it("grants exactly the burst to 40 concurrent requests", async () => {
        const store = await open();
        const results = await Promise.all(
          Array.from({ length: 40 }, (_, i) => store.admit("acme", { ...slow, burst: 9, concurrency: 100 }, `b${i}`, LEASE)),
        );
        expect(results.filter((r) => r.granted)).toHaveLength(9);
      });

      it("keeps a plan's rate limit", async () => {
        const store = await open();
        expect(await store.getPlanRateLimit("free")).toBeUndefined();
        await store.setPlanRateLimit("free", { rate: 0.5, burst: 4, concurrency: 1 });
        expect(await store.getPlanRateLimit("free")).toEqual({ rate: 0.5, burst: 4, concurrency: 1 });
      });
    });
  });
}
