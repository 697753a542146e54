/**
 * Issue 29's findings, each as an attacker would try it against a real server and engine
 * (HTTP/1.1 fetch and Connect over HTTP/1.1), with a victim client measured alongside.
 */
import http from "node:http";
import http2 from "node:http2";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryStore } from "../../src/auth/memory-store.js";
import { quotaPeriodOf } from "../../src/auth/quota-period.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { PalmService } from "../../gen/palm/v1/palm_pb.js";
import { callUnary, createGrpcJsClient } from "../helpers/grpc.js";
import { openH2Session } from "../helpers/h2.js";
import { makeManyScanJpeg } from "../helpers/jpeg-scans.js";
import { makeHandPhoto, makeImage } from "../helpers/images.js";
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
    // The victim has been served before: the engine knows how long an analysis takes, and how
    // long decoding takes per pixel, so a 40 MP image is expected to take far more than 100 ms
    // (admission.ts, expectedMs). Before this, the estimate was what the victim's small image
    // took, and an attack whose body arrived early enough ran, had its worker killed at its
    // deadline, and the victim got 503 while it ran.
    expect((await postAnalyze(srv.url, victimBody, { "x-api-key": victimKey })).res.status).toBe(200);
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
    // Refused before anything runs: by the deadline rule, or as `overloaded` (503 unavailable) while
    // the victim's analysis holds the one worker and there is no queue; never served, never charged.
    expect(attacks).toContain("504 deadline_exceeded");
    expect(new Set(attacks.filter((c) => c !== "504 deadline_exceeded"))).toEqual(
      new Set(attacks.includes("503 unavailable") ? ["503 unavailable"] : []),
    );
    expect(served.length).toBeGreaterThan(0);
    expect(served.filter((s) => s !== 200)).toEqual([]);
    expect(await store.usage("attacker", quotaPeriodOf())).toBe(0);
  }, 60_000);
});

describe("finding 3: a progressive JPEG of many scans", () => {
  it("is refused as invalid_image before it runs, over REST (HTTP/1.1) and gRPC (HTTP/2), not charged; ordinary JPEGs of its size are served", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "pro");
    const srv = await startServer({ analyzer, store });
    const grpcJs = createGrpcJsClient(srv.port);
    try {
      // 10,000 x 4,000 in 2,647 scans, 431 KiB: a decoder would pass over the image 2,647 times.
      const many = makeManyScanJpeg(10_000, 4000);
      const rest = await fetch(`${srv.url}/v1/palm/analyze`, {
        method: "POST",
        headers: { "content-type": "image/jpeg", "x-api-key": key },
        body: new Uint8Array(many),
      });
      const json = (await rest.json()) as { error: { code: string; message: string } };
      expect([rest.status, json.error.code, json.error.message]).toEqual([
        400,
        "invalid_image",
        "The JPEG image has 2647 scans (at most 64 are accepted).",
      ]);
      const grpc = await callUnary(grpcJs, PalmService.method.analyze, { image: many, images: "none" }, { "x-api-key": key });
      expect([grpc.error?.code, grpc.error?.details]).toEqual([3, "The JPEG image has 2647 scans (at most 64 are accepted)."]);
      expect(await store.usage("acme", quotaPeriodOf())).toBe(0);
      // Baseline and progressive JPEGs of that size still work (lean answers: the engine's work only).
      const photo = sharp(await makeHandPhoto(1200, 1600)).resize(10_000, 4000, { fit: "fill" });
      for (const jpeg of [await photo.clone().jpeg().toBuffer(), await photo.clone().jpeg({ progressive: true }).toBuffer()]) {
        const ok = await fetch(`${srv.url}/v1/palm/analyze?images=none`, {
          method: "POST",
          headers: { "content-type": "image/jpeg", "x-api-key": key },
          body: new Uint8Array(jpeg),
        });
        expect(ok.status).toBe(200);
      }
      expect(await store.usage("acme", quotaPeriodOf())).toBe(2);
    } finally {
      grpcJs.close();
      await srv.close();
    }
  }, 120_000);
});

describe("finding 4: a client that resets while its unit is reserved", () => {
  it("gives the unit back at once every time, over HTTP/1.1 and HTTP/2, whenever the reset comes", async () => {
    const store = createMemoryStore();
    const key = await registerKey(store, "acme", "pro");
    const srv = await startServer({ analyzer, store, config: { analyzeTimeoutMs: 60_000 } });
    try {
      const body = JSON.stringify({ image: (await makeHandPhoto(1200, 1600)).toString("base64") });
      const session = await openH2Session(srv.url);
      const period = quotaPeriodOf();
      for (let i = 0; i < 12; i++) {
        let reset: () => void;
        if (i % 2) {
          const req = http.request({
            host: "127.0.0.1",
            port: srv.port,
            path: "/v1/palm/analyze",
            method: "POST",
            headers: { "content-type": "application/json", "x-api-key": key },
            agent: false,
          });
          req.on("error", () => {});
          req.end(body);
          reset = () => req.destroy();
        } else {
          const stream = session.request({
            ":method": "POST",
            ":path": "/v1/palm/analyze",
            "content-type": "application/json",
            "x-api-key": key,
          });
          stream.on("error", () => {});
          stream.end(body);
          reset = () => stream.close(http2.constants.NGHTTP2_CANCEL);
        }
        // Reset while the unit is being reserved, or while the analysis runs.
        if (i % 4 < 2) await expect.poll(() => store.usage("acme", period), { timeout: 60_000, interval: 2 }).toBe(1);
        else await new Promise((r) => setTimeout(r, 20 * i));
        reset();
        // Given back at once, not when its lease (30 s) passes.
        await expect.poll(() => store.usage("acme", period), { timeout: 3000, interval: 20 }).toBe(0);
        await expect.poll(() => analyzer.stats().running, { timeout: 60_000, interval: 20 }).toBe(0);
      }
      session.close();
    } finally {
      await srv.close();
    }
  }, 600_000);
});
