import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HealthCheckResponse_ServingStatus } from "../../../gen/grpc/health/v1/health_pb.js";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { generateApiKey, hashApiKey } from "../../../src/auth/api-key.js";
import { createMemoryStore } from "../../../src/auth/memory-store.js";
import type { Store } from "../../../src/auth/store.js";
import { ERRORS, StoreUnavailableError } from "../../../src/errors.js";
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

/** A real in-memory store that counts lookups. */
function countingStore(): Store & { lookups: number } {
  const inner = createMemoryStore();
  const s = Object.create(inner) as Store & { lookups: number };
  s.lookups = 0;
  s.findKey = async (hash) => {
    s.lookups++;
    return inner.findKey(hash);
  };
  return s;
}

describe("createApiKeyInterceptor()", () => {
  it("rejects a call without x-api-key with Unauthenticated missing_api_key", async () => {
    const { palm } = createInMemoryService({ analyzer, store: createMemoryStore() });
    const err = await catchError(palm.analyze({ image }));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toBe(ERRORS.missing_api_key.message);
    expect(err.findDetails(ErrorInfoSchema)).toMatchObject([{ reason: "missing_api_key", domain: "palm.v1" }]);
  });

  it.each([
    ["uppercase hex", "palm_live_0123456789ABCDEF0123456789abcdef"],
    ["31 hex characters", "palm_live_0123456789abcdef0123456789abcde"],
    ["another prefix", "palm_test_0123456789abcdef0123456789abcdef"],
    ["surrounding junk", "Bearer palm_live_0123456789abcdef0123456789abcdef"],
  ])("rejects a key with %s as invalid_api_key before any store lookup", async (_, key) => {
    const store = countingStore();
    const { palm } = createInMemoryService({ analyzer, store });
    const err = await catchError(palm.analyze({ image }, { headers: { "x-api-key": key } }));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.findDetails(ErrorInfoSchema)[0].reason).toBe("invalid_api_key");
    expect(store.lookups).toBe(0);
  });

  it("rejects an unknown and a revoked key alike", async () => {
    const store = countingStore();
    const key = await registerKey(store, "acme");
    await store.revokeKey(hashApiKey(key));
    const { palm } = createInMemoryService({ analyzer, store });
    for (const k of [key, generateApiKey()]) {
      const err = await catchError(palm.analyze({ image }, { headers: { "x-api-key": k } }));
      expect([err.code, err.rawMessage]).toEqual([Code.Unauthenticated, ERRORS.invalid_api_key.message]);
    }
    expect(store.lookups).toBe(2);
  });

  it("fails closed with Unavailable store_unavailable when the store cannot answer", async () => {
    const store = createMemoryStore();
    store.findKey = async () => {
      throw new StoreUnavailableError("connection refused");
    };
    const { palm } = createInMemoryService({ analyzer, store });
    const err = await catchError(palm.analyze({ image }, { headers: { "x-api-key": generateApiKey() } }));
    expect([err.code, err.findDetails(ErrorInfoSchema)[0].reason]).toEqual([Code.Unavailable, "store_unavailable"]);
  });

  it("lets the health checks through without a key", async () => {
    const { palm, health } = createInMemoryService({ analyzer, store: createMemoryStore() });
    expect((await palm.health({})).status).toBe("ok");
    expect((await health.check({})).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it("accepts a registered key", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "pro");
    const { palm } = createInMemoryService({ analyzer, store });
    const res = await palm.analyze({ image }, { headers: { "x-api-key": key } });
    expect(res.usage?.plan).toBe("pro");
  });
});
