import { describe, expect, it } from "vitest";
import { hashApiKey } from "../../../src/auth/api-key.js";
import { createMemoryStore } from "../../../src/auth/memory-store.js";
import { quotaPeriodOf } from "../../../src/auth/quota-period.js";
import { runPalmctl } from "../../../src/cli/palmctl.js";

function harness() {
  const store = createMemoryStore();
  const out: string[] = [];
  const err: string[] = [];
  const run = (...argv: string[]) => runPalmctl(argv, { env: {}, store, stdout: (l) => out.push(l), stderr: (l) => err.push(l) });
  return { store, out, err, run };
}

describe("runPalmctl()", () => {
  it("creates a key, prints it alone on the last line and stores only its hash", async () => {
    const h = harness();
    expect(await h.run("keys", "create", "--client", "acme", "--plan", "starter")).toBe(0);
    const key = h.out.at(-1)!;
    expect(key).toMatch(/^palm_live_[0-9a-f]{32}$/);
    expect(await h.store.findKey(hashApiKey(key))).toEqual({ clientId: "acme", plan: "starter" });
    const [record] = await h.store.listKeys("acme");
    expect(record.hash).toBe(hashApiKey(key));
    expect(JSON.stringify(record)).not.toContain(key);
  });

  it("lists a client's keys by hash prefix and revokes by key, hash or prefix", async () => {
    const h = harness();
    for (let i = 0; i < 3; i++) await h.run("keys", "create", "--client", "acme");
    const keys = h.out.filter((l) => l.startsWith("palm_live_"));
    const hashes = keys.map(hashApiKey);
    expect(await h.run("keys", "revoke", keys[0])).toBe(0);
    expect(await h.run("keys", "revoke", hashes[1])).toBe(0);
    expect(await h.run("keys", "revoke", hashes[2].slice(0, 12))).toBe(0);
    h.out.length = 0;
    expect(await h.run("keys", "list", "--client", "acme")).toBe(0);
    expect(h.out).toHaveLength(4);
    for (const hash of hashes) expect(h.out.some((l) => l.startsWith(hash.slice(0, 12)) && /Z$/.test(l))).toBe(true);
    for (const hash of hashes) expect(await h.store.findKey(hash)).toBeUndefined();
  });

  it("prints this month's usage against the plan's limit", async () => {
    const h = harness();
    await h.run("keys", "create", "--client", "acme", "--plan", "pro");
    await h.store.reserve("acme", quotaPeriodOf(), 10_000, "r1", 60_000);
    expect(await h.run("usage", "--client", "acme")).toBe(0);
    expect(h.out.at(-1)).toMatch(/^client acme plan pro period \d{4}-\d{2}: used 1 of 10000 /);
  });

  it("moves a client to another plan", async () => {
    const h = harness();
    await h.run("keys", "create", "--client", "acme");
    expect(await h.run("clients", "set-plan", "--client", "acme", "--plan", "starter")).toBe(0);
    expect((await h.store.getClient("acme"))?.plan).toBe("starter");
  });

  it("exits 2 with usage for an unknown plan, a missing flag or an unknown command", async () => {
    const h = harness();
    expect(await h.run("keys", "create", "--client", "acme", "--plan", "gold")).toBe(2);
    expect(h.err[0]).toBe('palmctl: unknown plan "gold"; PALM_PLAN_LIMITS has free, starter, pro');
    expect(await h.run("keys", "create")).toBe(2);
    expect(await h.run("frobnicate")).toBe(2);
  });

  it("exits 2 for per-client limits out of range, and stores nothing", async () => {
    const { run, err, store } = harness();
    expect(await run("plans", "set-rate-limit", "--plan", "free", "--rate", "0", "--burst", "1", "--concurrency", "1")).toBe(2);
    expect(err[0]).toBe("palmctl: rate must be a number of requests per second from 0.001 to 1000000");
    expect(await run("plans", "set-rate-limit", "--plan", "free", "--rate", "1", "--burst", "1.5", "--concurrency", "1")).toBe(2);
    expect(await run("plans", "set-rate-limit", "--plan", "gold", "--rate", "1", "--burst", "1", "--concurrency", "1")).toBe(2);
    expect(await store.getPlanRateLimit("free")).toBeUndefined();
  });

  it("exits 2 when REDIS_URL is not set", async () => {
    const err: string[] = [];
    const code = await runPalmctl(["keys", "list", "--client", "a"], { env: {}, stdout: () => {}, stderr: (l) => err.push(l) });
    expect(code).toBe(2);
    expect(err[0]).toMatch(/REDIS_URL is not set/);
  });

  it("exits 1 when revoking a key that does not exist", async () => {
    const h = harness();
    expect(await h.run("keys", "revoke", "0".repeat(64))).toBe(1);
    expect(h.err[0]).toBe("palmctl: no such key");
  });

  it("refuses client ids outside a-z 0-9 . _ - with exit 2, before touching the store", async () => {
    const h = harness();
    // "acme:keys" would name the Redis set of acme's keys; upper case and braces are refused too.
    for (const id of ["acme:keys", "Acme", "-acme", "a{b}", "", "x".repeat(65), "acme corp"]) {
      h.err.length = 0;
      expect(await h.run("keys", "create", "--client", id), id).toBe(2);
      expect(h.err[0]).toMatch(/--client (must be|needs a value)/);
    }
    expect(await h.store.listKeys("acme:keys")).toEqual([]);
    for (const id of ["acme", "a", "acme-corp.eu_1", "0", "x".repeat(64)])
      expect(await h.run("keys", "create", "--client", id), id).toBe(0);
  });
});
