/**
 * createReadiness() with the real engine and the in-memory store: each check that makes the
 * service not ready.
 */
import { describe, expect, it } from "vitest";
import { createMemoryStore } from "../../../src/auth/memory-store.js";
import { createReadiness } from "../../../src/ops/readiness.js";
import { createTestAnalyzer } from "../../helpers/analyzer.js";

describe("createReadiness()", () => {
  it("is ready with a loaded model, a worker up and a store that answers; not ready once draining begins", async () => {
    const analyzer = await createTestAnalyzer();
    try {
      const stopping = new AbortController();
      const readiness = createReadiness({ analyzer, store: createMemoryStore(), stopping: stopping.signal });
      expect(await readiness.check()).toEqual({
        status: "ready",
        checks: { model: "ok", workers: "ok", workers_up: "1 of 1", store: "ok", draining: false },
      });
      stopping.abort();
      expect(await readiness.check()).toMatchObject({ status: "not_ready", checks: { draining: true, store: "ok" } });
    } finally {
      await analyzer.close();
    }
  });

  it("is not ready when no analysis worker is up", async () => {
    const analyzer = await createTestAnalyzer();
    await analyzer.close(); // stops every worker process
    const readiness = createReadiness({ analyzer, store: createMemoryStore(), stopping: new AbortController().signal });
    expect(await readiness.check()).toMatchObject({ status: "not_ready", checks: { workers: "down", workers_up: "0 of 1" } });
  });
  // A store that does not answer: test/integration/ops.spec.ts (Redis on a closed port).
});
