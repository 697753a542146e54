import { Code, createClient, createRouterTransport } from "@connectrpc/connect";
import { PalmService } from "../../../gen/palm/v1/palm_pb.js";
import { createApiKeyInterceptor } from "../../../src/auth/api-key-interceptor.js";
import { createQuotaInterceptor } from "../../../src/auth/quota-interceptor.js";
import type { Store } from "../../../src/auth/store.js";
import { createTestConfig } from "../../helpers/config.js";
import { StoreUnavailableError } from "../../../src/errors.js";
import { createRoutes } from "../../../src/server/routes.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema, QuotaFailureSchema, RetryInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { createMemoryStore } from "../../../src/auth/memory-store.js";
import { quotaPeriodOf } from "../../../src/auth/quota-period.js";
import type { EngineAnalyzer } from "../../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../../helpers/analyzer.js";
import { makeImage } from "../../helpers/images.js";
import { catchError, createInMemoryService } from "../../helpers/in-memory.js";
import { registerKey } from "../../helpers/keys.js";

let analyzer: EngineAnalyzer;
let image: Buffer;
beforeAll(async () => {
  [analyzer, image] = await Promise.all([createTestAnalyzer(), makeImage(128, 128)]);
});
afterAll(() => analyzer?.close());

// A fixed clock in the last second of a month: the reset is the next midnight UTC.
const now = () => new Date("2030-12-31T23:59:50Z");
const period = quotaPeriodOf(now());

describe("createQuotaInterceptor()", () => {
  it("rejects the 101st call of a free client with ResourceExhausted, QuotaFailure and RetryInfo", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "free");
    for (let i = 0; i < 100; i++) await store.reserve("acme", period, 100, `earlier-${i}`, 60_000);
    const { palm } = createInMemoryService({ analyzer, store, now });
    const err = await catchError(palm.analyze({ image }, { headers: { "x-api-key": key } }));
    expect(err.code).toBe(Code.ResourceExhausted);
    expect(err.findDetails(ErrorInfoSchema)[0]).toMatchObject({ reason: "quota_exceeded", domain: "palm.v1" });
    expect(err.findDetails(QuotaFailureSchema)[0].violations[0].subject).toBe("client:acme");
    expect(Number(err.findDetails(RetryInfoSchema)[0].retryDelay?.seconds)).toBe(10);
    expect(err.metadata.get("retry-after")).toBe("10");
    expect(err.metadata.get("x-monthly-quota-remaining")).toBe("0");
    expect(err.metadata.get("x-monthly-quota-limit")).toBe("100");
    expect(err.metadata.get("x-monthly-quota-reset")).toBe(String(Date.UTC(2031, 0, 1) / 1000));
    expect(await store.usage("acme", period)).toBe(100);
  });

  it("counts a success and reports it in usage and the headers", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "starter");
    const { palm } = createInMemoryService({ analyzer, store, now });
    let header: Headers | undefined;
    const res = await palm.analyze({ image }, { headers: { "x-api-key": key }, onHeader: (h) => (header = h) });
    expect(res.usage).toMatchObject({ requestsUsed: 1n, requestsLimit: 1000n, plan: "starter", resetsAt: BigInt(period.resetsAt) });
    expect(header?.get("x-monthly-quota-remaining")).toBe("999");
    expect(await store.usage("acme", period)).toBe(1);
  });

  it("refunds the reservation when the work fails, and still sends the quota headers", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "free");
    const { palm } = createInMemoryService({ analyzer, store, now });
    const err = await catchError(palm.analyze({ image: image.subarray(0, 100) }, { headers: { "x-api-key": key } }));
    expect(err.findDetails(ErrorInfoSchema)[0].reason).toBe("invalid_image");
    expect(err.metadata.get("x-monthly-quota-remaining")).toBe("100");
    expect(await store.usage("acme", period)).toBe(0);
  });

  it("refunds the reservation when the client cancels", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "free");
    const { palm } = createInMemoryService({ analyzer, store, now });
    const abort = new AbortController();
    // A 2 MP image, cancelled once its analysis runs: after the reservation, before the answer
    // (a fixed delay raced the analysis of a small image on a fast machine).
    const big = await makeImage(1600, 1200);
    const call = palm.analyze({ image: big }, { headers: { "x-api-key": key }, signal: abort.signal });
    await expect.poll(() => analyzer.stats().running, { interval: 1 }).toBe(1);
    abort.abort();
    expect((await catchError(call)).code).toBe(Code.Canceled);
    await expect.poll(() => store.usage("acme", period)).toBe(0);
  });

  it("answers internal_error for a client whose plan is not configured", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "platinum");
    const { palm } = createInMemoryService({ analyzer, store, now });
    const err = await catchError(palm.analyze({ image }, { headers: { "x-api-key": key } }));
    expect([err.code, err.rawMessage]).toEqual([Code.Internal, "An internal error occurred."]);
  });
});

describe("createQuotaInterceptor() when the store loses answers", () => {
  it("leaves a reservation whose answer was lost to its lease, which gives it back", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "free");
    // A stand-in for a network that drops the answer of a reserve that did run in the store,
    // and for a store that is gone when the release is sent.
    const lossy: Store = Object.create(store);
    let releases = 0;
    lossy.reserve = async (...args) => {
      await store.reserve(...args);
      throw new StoreUnavailableError("Command timed out", { maybeApplied: true });
    };
    lossy.release = async () => {
      releases++;
      throw new StoreUnavailableError("still down");
    };
    const transport = createRouterTransport(createRoutes({ analyzer, config: createTestConfig() }), {
      router: {
        interceptors: [
          createApiKeyInterceptor({ store }),
          createQuotaInterceptor({ store: lossy, planLimits: { free: 100 }, now, leaseMs: 400 }),
        ],
      },
    });
    const err = await catchError(createClient(PalmService, transport).analyze({ image }, { headers: { "x-api-key": key } }));
    expect(err.findDetails(ErrorInfoSchema)[0].reason).toBe("store_unavailable");
    expect(releases).toBe(1);
    expect(await store.usage("acme", period)).toBe(1);
    await expect.poll(() => store.usage("acme", period), { timeout: 2000, interval: 50 }).toBe(0);
  });
});
