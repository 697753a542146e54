/**
 * The same Analyze over binary gRPC (@grpc/grpc-js), gRPC (connect-node), gRPC-Web, Connect and
 * REST on one port: same answers, same metadata, same errors with their ErrorInfo details.
 */
import * as grpc from "@grpc/grpc-js";
import { Code, ConnectError, createClient, type Transport } from "@connectrpc/connect";
import {
  compressionBrotli,
  compressionGzip,
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
} from "@connectrpc/connect-node";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponseSchema,
  HealthCheckResponse_ServingStatus,
} from "../../gen/grpc/health/v1/health_pb.js";
import { BadRequestSchema, ErrorInfoSchema, QuotaFailureSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { AnalysisResultsSchema, HandShapeSchema, HeadLifeStartSchema, LineTraitsSchema, PalmService } from "../../gen/palm/v1/palm_pb.js";
import { create, equals, fromBinary, toBinary, toJson } from "@bufbuild/protobuf";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { ERRORS } from "../../src/errors.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { callUnary, createGrpcJsClient, decodeGrpcError } from "../helpers/grpc.js";
import { makeImage } from "../helpers/images.js";
import { registerKey } from "../helpers/keys.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { postAnalyze } from "../helpers/rest.js";
import { startServer, type TestServer } from "../helpers/server.js";
import { H2_CONNECTION_WINDOW, H2_STREAM_WINDOW } from "../../src/server/server.js";

let redis: RedisProcess;
let analyzer: EngineAnalyzer;
let jpeg: Buffer;
beforeAll(async () => {
  [redis, analyzer, jpeg] = await Promise.all([startRedis(), createTestAnalyzer(), makeImage(240, 180, "jpeg")]);
});
afterAll(async () => {
  await analyzer?.close();
  await redis?.stop();
});

let store: RedisStore;
let srv: TestServer;
let key: string;
let grpcJs: grpc.Client;
const transports: Record<string, () => Transport> = {
  "gRPC (connect-node)": () => createGrpcTransport({ baseUrl: srv.url }),
  "gRPC-Web": () => createGrpcWebTransport({ baseUrl: srv.url, httpVersion: "1.1" }),
  "Connect (HTTP/1.1, JSON)": () => createConnectTransport({ baseUrl: srv.url, httpVersion: "1.1", useBinaryFormat: false }),
  "Connect (HTTP/2, binary)": () => createConnectTransport({ baseUrl: srv.url, httpVersion: "2", useBinaryFormat: true }),
};

beforeEach(async () => {
  store = createRedisStore({ url: redis.url, keyPrefix: uniquePrefix() });
  await store.ready(5000);
  srv = await startServer({ analyzer, store, config: { planLimits: { free: 100, starter: 1000, pro: 10000, tiny: 1 } } });
  key = await registerKey(store, "acme", "starter");
  grpcJs = createGrpcJsClient(srv.port);
});
afterEach(async () => {
  grpcJs.close();
  await srv.close();
  await store.close();
});

const usedNow = () => store.usage("acme", quotaPeriodOf());

/** watchHealth opens grpc.health.v1.Health/Watch with grpc-js and records what arrives. */
function watchHealth(service: string) {
  const statuses: HealthCheckResponse_ServingStatus[] = [];
  const call = grpcJs.makeServerStreamRequest(
    `/${Health.typeName}/Watch`,
    (m: { service: string }) => Buffer.from(toBinary(HealthCheckRequestSchema, create(HealthCheckRequestSchema, m))),
    (b: Buffer) => fromBinary(HealthCheckResponseSchema, b),
    { service },
  );
  call.on("data", (m: { status: HealthCheckResponse_ServingStatus }) => statuses.push(m.status));
  const ended = new Promise<grpc.StatusObject>((resolve) => call.on("status", resolve));
  call.on("error", () => {}); // a cancelled call reports through "status"
  return { statuses, ended, cancel: () => call.cancel() };
}

describe("grpc.health.v1.Health", () => {
  it("Watch sends SERVING at once, then NOT_SERVING when shutdown begins, and ends so the drain is not held up", async () => {
    const watch = watchHealth("");
    const pinned = watchHealth(PalmService.typeName);
    await expect.poll(() => watch.statuses.length + pinned.statuses.length).toBe(2);
    expect(watch.statuses).toEqual([HealthCheckResponse_ServingStatus.SERVING]);
    expect(pinned.statuses).toEqual([HealthCheckResponse_ServingStatus.SERVING]);
    const started = Date.now();
    await srv.close(); // grace 2 s: a stream still open would hold the shutdown for all of it
    expect(Date.now() - started).toBeLessThan(1500);
    expect((await watch.ended).code).toBe(grpc.status.OK);
    expect(watch.statuses).toEqual([HealthCheckResponse_ServingStatus.SERVING, HealthCheckResponse_ServingStatus.NOT_SERVING]);
    expect(pinned.statuses).toEqual([HealthCheckResponse_ServingStatus.SERVING, HealthCheckResponse_ServingStatus.NOT_SERVING]);
  });

  it("Watch of an unknown service answers SERVICE_UNKNOWN and stays open until the client cancels; Check answers NOT_FOUND", async () => {
    const watch = watchHealth("no.such.Service");
    await expect.poll(() => watch.statuses.length).toBe(1);
    expect(watch.statuses).toEqual([HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN]);
    await new Promise((r) => setTimeout(r, 100));
    expect(watch.statuses).toHaveLength(1);
    watch.cancel();
    expect((await watch.ended).code).toBe(grpc.status.CANCELLED);
    const check = await callUnary(grpcJs, Health.method.check, { service: "no.such.Service" });
    expect(check.error?.code).toBe(grpc.status.NOT_FOUND);
    expect(check.connectError?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("not_found");
    // The server serves on.
    const ok = await callUnary(grpcJs, Health.method.check, { service: PalmService.typeName });
    expect(ok.message?.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
  });

  it("Watch works over Connect too, without a key", async () => {
    const client = createClient(Health, transports["Connect (HTTP/2, binary)"]());
    const ac = new AbortController();
    const it = client.watch({}, { signal: ac.signal })[Symbol.asyncIterator]();
    expect((await it.next()).value?.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    ac.abort();
  });
});

describe("PalmService/Analyze across protocols", () => {
  it("gives the same answer and metadata over grpc-js, connect-node gRPC, gRPC-Web, Connect and REST", async () => {
    const reset = String(quotaPeriodOf().resetsAt);

    const viaGrpcJs = await callUnary(grpcJs, PalmService.method.analyze, { image: jpeg }, { "x-api-key": key });
    expect(viaGrpcJs.error).toBeUndefined();
    const first = viaGrpcJs.message!;
    expect(first.id).toMatch(/^palm_[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(viaGrpcJs.header.get("x-request-id")).toEqual([first.id]);
    expect(viaGrpcJs.header.get("x-monthly-quota-limit")).toEqual(["1000"]);
    expect(viaGrpcJs.header.get("x-monthly-quota-remaining")).toEqual(["999"]);
    expect(viaGrpcJs.header.get("x-monthly-quota-reset")).toEqual([reset]);
    expect(first.object).toBe("palm.analysis");
    expect(first.model).toBe(analyzer.model);
    expect(first.usage).toMatchObject({ requestsUsed: 1n, requestsLimit: 1000n, plan: "starter", resetsAt: BigInt(reset) });

    let n = 1;
    for (const [name, make] of Object.entries(transports)) {
      n++;
      const client = createClient(PalmService, make());
      let header: Headers | undefined;
      const res = await client.analyze({ image: jpeg }, { headers: { "x-api-key": key }, onHeader: (h) => (header = h) });
      expect(equals(AnalysisResultsSchema, res.results!, first.results!), name).toBe(true);
      expect(res.model, name).toBe(first.model);
      expect(res.usage?.requestsUsed, name).toBe(BigInt(n));
      expect(res.id, name).not.toBe(first.id);
      expect(header?.get("x-request-id"), name).toBe(res.id);
      expect(header?.get("x-monthly-quota-limit"), name).toBe("1000");
      expect(header?.get("x-monthly-quota-remaining"), name).toBe(String(1000 - n));
      expect(header?.get("x-monthly-quota-reset"), name).toBe(reset);
    }

    const rest = await postAnalyze(srv.url, { image: jpeg.toString("base64") }, { "x-api-key": key });
    expect(rest.res.status).toBe(200);
    expect(rest.json.results.overlay).toBe(Buffer.from(first.results!.overlay).toString("base64"));
    expect(rest.json.results.masks.life).toBe(Buffer.from(first.results!.masks!.life).toString("base64"));
    expect(rest.json.results.stats.heart).toEqual({
      pixels: Number(first.results!.stats!.heart!.pixels),
      confidence: first.results!.stats!.heart!.confidence,
      coverage: first.results!.stats!.heart!.coverage,
      detected: first.results!.stats!.heart!.detected,
      polyline: first.results!.stats!.heart!.polyline.map(({ x, y }) => ({ x, y })),
      length: first.results!.stats!.heart!.length,
      reason: first.results!.stats!.heart!.reason,
      ...(first.results!.stats!.heart!.traits && { traits: restJson(LineTraitsSchema, first.results!.stats!.heart!.traits) }),
    });
    expect(rest.json.results.reason).toBe(first.results!.reason);
    expect(rest.json.usage.requests_used).toBe(n + 1);
    expect(await usedNow()).toBe(n + 1);
  });

  it("finds all three lines of the README's sample photo, with the hand, over REST, grpc-js, gRPC and Connect alike", async () => {
    const sample = readFileSync(new URL("../../examples/sample-palm.jpg", import.meta.url));
    const viaGrpcJs = await callUnary(grpcJs, PalmService.method.analyze, { image: sample }, { "x-api-key": key });
    expect(viaGrpcJs.error).toBeUndefined();
    const results = viaGrpcJs.message!.results!;
    expect(results.reason).toBe("");
    expect(results.hand?.landmarks).toHaveLength(21);
    for (const line of ["heart", "head", "life"] as const) {
      expect(results.stats![line]!.detected, line).toBe(true);
      expect(results.stats![line]!.polyline.length, line).toBeGreaterThanOrEqual(2);
      expect(results.stats![line]!.length, line).toBeGreaterThan(0.3);
    }
    for (const name of ["gRPC (connect-node)", "Connect (HTTP/2, binary)", "Connect (HTTP/1.1, JSON)"]) {
      const res = await createClient(PalmService, transports[name]()).analyze({ image: sample }, { headers: { "x-api-key": key } });
      expect(equals(AnalysisResultsSchema, res.results!, results), name).toBe(true);
    }
    const rest = await postAnalyze(srv.url, { image: sample.toString("base64") }, { "x-api-key": key });
    expect(rest.res.status).toBe(200);
    expect(rest.json.results.reason).toBe("");
    expect(rest.json.results.hand.handedness).toBe(results.hand!.handedness);
    for (const line of ["heart", "head", "life"]) expect(rest.json.results.stats[line].detected, line).toBe(true);
    // Hand shape and line traits: the same on every protocol (gRPC and Connect by equals above).
    expect(results.hand!.shape!.palmLength).toBeGreaterThan(0);
    expect(rest.json.results.hand.shape).toEqual(restJson(HandShapeSchema, results.hand!.shape!));
    for (const line of ["heart", "head", "life"] as const) {
      const t = results.stats![line]!.traits!;
      expect(t, line).toBeDefined();
      expect(["short", "medium", "long"]).toContain(t.length);
      expect(rest.json.results.stats[line].traits, line).toEqual(restJson(LineTraitsSchema, t));
    }
    expect(rest.json.results.head_life_start).toEqual(restJson(HeadLifeStartSchema, results.headLifeStart!));
  });

  it("answers grpc.health.v1.Health/Check with SERVING and PalmService/Health with ok, without a key", async () => {
    const check = await callUnary(grpcJs, Health.method.check, {});
    expect(check.message?.status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    const health = await callUnary(grpcJs, PalmService.method.health, {});
    expect(health.message?.status).toBe("ok");
  });

  it("answers an unknown method with UNIMPLEMENTED and ErrorInfo not_found", async () => {
    const r = await new Promise<grpc.ServiceError | null>((resolve) =>
      grpcJs.makeUnaryRequest(
        "/palm.v1.PalmService/Nope",
        (x: Buffer) => x,
        (x: Buffer) => x,
        Buffer.alloc(0),
        (e) => resolve(e),
      ),
    );
    expect(r?.code).toBe(grpc.status.UNIMPLEMENTED);
    expect(r?.details).toBe(ERRORS.not_found.message);
    expect(decodeGrpcError(r!.metadata)?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("not_found");
    // A Connect client reads the HTTP 404 as unimplemented.
    const viaConnect = await fetch(`${srv.url}/palm.v1.PalmService/Nope`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1" },
      body: "{}",
    });
    expect(viaConnect.status).toBe(404);
  });

  it("lets an HTTP/2 client send a whole photo ahead (8 MiB per call and, once a call with a key was admitted, per connection), not HTTP/2's default 64 KiB", async () => {
    // With 64 KiB a 3.6 MB photo takes ~60 round trips to upload: most of a second over a 10 ms link.
    const session = http2.connect(srv.url);
    try {
      await new Promise<void>((resolve, reject) => {
        session.once("remoteSettings", () => resolve());
        session.once("error", reject);
      });
      // Until a call with a key is admitted the connection keeps HTTP/2's defaults (door.spec.ts).
      expect(session.remoteSettings.initialWindowSize).toBe(65_535);
      await new Promise((r) => setTimeout(r, 50));
      expect(session.state.remoteWindowSize).toBe(65_535);
      const call = session.request({
        ":method": "POST",
        ":path": "/palm.v1.PalmService/Analyze",
        "content-type": "application/json",
        "connect-protocol-version": "1",
        "x-api-key": key,
      });
      call.end("{}"); // no image: missing_image, after the key was admitted
      const status = await new Promise((resolve) => call.once("response", (h) => resolve(h[":status"])));
      expect(status).toBe(400);
      // Right after the admission: a SETTINGS frame for the streams, a WINDOW_UPDATE for the connection.
      for (let i = 0; i < 100 && (session.state.remoteWindowSize ?? 0) < H2_CONNECTION_WINDOW - 64; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      expect(session.state.remoteWindowSize).toBeGreaterThan(H2_CONNECTION_WINDOW - 64);
      expect(session.remoteSettings.initialWindowSize).toBe(H2_STREAM_WINDOW);
    } finally {
      session.close();
    }
    expect(H2_STREAM_WINDOW).toBe(8 * 1024 * 1024);
    expect(H2_CONNECTION_WINDOW).toBe(8 * 1024 * 1024);
  });
});

/** A message just over the 8 MiB body limit; Connect JSON carries the image as base64, so 6.1 MiB of image make a body over 8 MiB. */
const big = Buffer.alloc(8 * 1024 * 1024 + 16, 0x41);
const viaJson = Buffer.alloc(6.1 * 1024 * 1024, 0x41);

/** expectTooLargeOverGrpcJs: RESOURCE_EXHAUSTED with SPEC's message and ErrorInfo image_too_large. */
function expectTooLargeOverGrpcJs(r: { error?: grpc.ServiceError; connectError?: ConnectError }): void {
  expect(r.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
  expect(r.error?.details).toBe(ERRORS.image_too_large.message);
  expect(r.connectError?.findDetails(ErrorInfoSchema)).toMatchObject([{ reason: "image_too_large", domain: "palm.v1" }]);
}

/** expectTooLargeOnEveryProtocol sends the oversized message over each transport and expects image_too_large with its ErrorInfo. */
async function expectTooLargeOnEveryProtocol(over: Record<string, () => Transport>): Promise<void> {
  for (const [name, transport] of Object.entries(over)) {
    const client = createClient(PalmService, transport());
    const image = name.includes("JSON") ? viaJson : big;
    const err = await client.analyze({ image }, { headers: { "x-api-key": key } }).catch((e) => ConnectError.from(e));
    expect(err, name).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code, name).toBe(Code.ResourceExhausted);
    expect((err as ConnectError).rawMessage, name).toBe(ERRORS.image_too_large.message);
    expect((err as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason, name).toBe("image_too_large");
  }
}

describe("PalmService/Analyze errors over gRPC and Connect", () => {
  it("rejects a call without a key with UNAUTHENTICATED and ErrorInfo missing_api_key", async () => {
    const r = await callUnary(grpcJs, PalmService.method.analyze, { image: jpeg });
    expect(r.error?.code).toBe(grpc.status.UNAUTHENTICATED);
    expect(r.error?.details).toBe(ERRORS.missing_api_key.message);
    expect(r.connectError?.findDetails(ErrorInfoSchema)).toMatchObject([{ reason: "missing_api_key", domain: "palm.v1" }]);
    expect(r.trailer.get("x-monthly-quota-remaining")).toEqual([]);
    expect(r.trailer.get("x-request-id")[0]).toMatch(/^palm_/);
  });

  it("rejects a bad image with INVALID_ARGUMENT, ErrorInfo and BadRequest, quota headers and no charge", async () => {
    const r = await callUnary(grpcJs, PalmService.method.analyze, { image: jpeg.subarray(0, 300) }, { "x-api-key": key });
    expect(r.error?.code).toBe(grpc.status.INVALID_ARGUMENT);
    expect(r.connectError?.findDetails(ErrorInfoSchema)).toMatchObject([{ reason: "invalid_image", domain: "palm.v1" }]);
    expect(r.connectError?.findDetails(BadRequestSchema)[0]?.fieldViolations[0]?.field).toBe("image");
    expect(r.trailer.get("x-monthly-quota-remaining")).toEqual(["1000"]);
    expect(await usedNow()).toBe(0);
  });

  it("rejects an empty image with INVALID_ARGUMENT missing_image", async () => {
    const client = createClient(PalmService, transports["Connect (HTTP/1.1, JSON)"]());
    const err = await client.analyze({}, { headers: { "x-api-key": key } }).catch((e) => ConnectError.from(e));
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toBe(ERRORS.missing_image.message);
    expect((err as ConnectError).findDetails(ErrorInfoSchema)[0]?.reason).toBe("missing_image");
  });

  it("rejects an image over 5 MiB with RESOURCE_EXHAUSTED image_too_large", async () => {
    const over5MiB = Buffer.alloc(5 * 1024 * 1024 + 1, 0x41);
    const r = await callUnary(grpcJs, PalmService.method.analyze, { image: over5MiB }, { "x-api-key": key });
    expect(r.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.connectError?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("image_too_large");
    expect(await usedNow()).toBe(0);
  });

  it("rejects a message over the 8 MiB body limit with image_too_large and its ErrorInfo on every RPC protocol, uncharged", async () => {
    const r = await callUnary(grpcJs, PalmService.method.analyze, { image: big }, { "x-api-key": key });
    expectTooLargeOverGrpcJs(r);
    await expectTooLargeOnEveryProtocol(transports);
    expect(await usedNow()).toBe(0);
    const after = await callUnary(grpcJs, PalmService.method.analyze, { image: jpeg }, { "x-api-key": key });
    expect(after.error).toBeUndefined();
  });

  it("rejects a small compressed message that inflates past 8 MiB with image_too_large and its ErrorInfo on every RPC protocol, uncharged", async () => {
    // 8 MiB of one byte gzips to a few KiB: the envelope is small, the message is not.
    const gzipJs = new grpc.Client(`127.0.0.1:${srv.port}`, grpc.credentials.createInsecure(), {
      "grpc.default_compression_algorithm": 2, // gzip
      "grpc.max_send_message_length": 16 * 1024 * 1024,
    });
    try {
      const r = await callUnary(gzipJs, PalmService.method.analyze, { image: big }, { "x-api-key": key });
      expectTooLargeOverGrpcJs(r);
      // The same client's compressed messages under the limit are analysed.
      const ok = await callUnary(gzipJs, PalmService.method.analyze, { image: jpeg }, { "x-api-key": key });
      expect(ok.error).toBeUndefined();
      expect(ok.message?.results?.stats?.heart).toBeDefined();
    } finally {
      gzipJs.close();
    }
    const gzipTransports: Record<string, () => Transport> = {
      "gRPC (connect-node)": () => createGrpcTransport({ baseUrl: srv.url, sendCompression: compressionGzip }),
      "gRPC-Web": () => createGrpcWebTransport({ baseUrl: srv.url, httpVersion: "1.1", sendCompression: compressionGzip }),
      "Connect (HTTP/1.1, JSON)": () =>
        createConnectTransport({ baseUrl: srv.url, httpVersion: "1.1", useBinaryFormat: false, sendCompression: compressionGzip }),
      "Connect (HTTP/2, binary)": () =>
        createConnectTransport({ baseUrl: srv.url, httpVersion: "2", useBinaryFormat: true, sendCompression: compressionBrotli }),
    };
    await expectTooLargeOnEveryProtocol(gzipTransports);
    expect(await usedNow()).toBe(1);
  });

  it("rejects the call past the plan's limit with RESOURCE_EXHAUSTED, QuotaFailure, RetryInfo and retry-after", async () => {
    const tinyKey = await registerKey(store, "tiny-co", "tiny");
    const ok = await callUnary(grpcJs, PalmService.method.analyze, { image: jpeg }, { "x-api-key": tinyKey });
    expect(ok.error).toBeUndefined();
    const r = await callUnary(grpcJs, PalmService.method.analyze, { image: jpeg }, { "x-api-key": tinyKey });
    expect(r.error?.code).toBe(grpc.status.RESOURCE_EXHAUSTED);
    expect(r.connectError?.findDetails(ErrorInfoSchema)[0]?.reason).toBe("quota_exceeded");
    expect(r.connectError?.findDetails(QuotaFailureSchema)[0]?.violations[0]?.subject).toBe("client:tiny-co");
    const retry = r.connectError?.findDetails(RetryInfoSchema)[0]?.retryDelay;
    const seconds = Number(r.trailer.get("retry-after")[0]);
    expect(Number(retry?.seconds)).toBe(seconds);
    expect(seconds).toBeGreaterThan(0);
    expect(r.trailer.get("x-monthly-quota-remaining")).toEqual(["0"]);
  });

  it("answers DEADLINE_EXCEEDED (timeout) at the client's deadline and refunds the reservation", async () => {
    // A 12 MP photo takes a few hundred ms to analyse: the 30 ms deadline passes while the
    // server holds it (the 240x180 image can finish within 30 ms on a fast machine).
    const big = await makeImage(4000, 3000, "jpeg");
    const client = createClient(PalmService, createGrpcTransport({ baseUrl: srv.url }));
    const err = await client.analyze({ image: big }, { headers: { "x-api-key": key }, timeoutMs: 30 }).catch((e) => ConnectError.from(e));
    expect((err as ConnectError).code).toBe(Code.DeadlineExceeded);
    await expect.poll(usedNow, { timeout: 3000 }).toBe(0);
  });
});

/** restJson is a message as the REST surface writes it (proto names, every field present). */
function restJson(schema: Parameters<typeof toJson>[0], message: Parameters<typeof toJson>[1]) {
  return toJson(schema, message, { useProtoFieldName: true, alwaysEmitImplicit: true });
}
