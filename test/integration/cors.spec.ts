/**
 * CORS (PALM_CORS_ORIGINS) with real HTTP requests: preflights, the exposed headers, and, in
 * headless Chromium, REST and gRPC-Web calls from a page on another origin.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { fromBinary } from "@bufbuild/protobuf";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HealthResponseSchema } from "../../gen/palm/v1/palm_pb.js";
import type { Config } from "../../src/config.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { findChromium } from "../helpers/browser.js";
import { startKeyedServer, type TestServer } from "../helpers/server.js";

const APP = "https://app.example.com";
let analyzer: EngineAnalyzer;
beforeAll(async () => {
  analyzer = await createTestAnalyzer();
});
afterAll(async () => {
  await analyzer?.close();
});

/** request sends one HTTP/1.1 request with exactly these headers (Origin included). */
function request(
  url: string,
  method: string,
  headers: Record<string, string>,
  body?: string,
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers, agent: false }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function withServer(config: Partial<Config>, fn: (srv: TestServer, key: string) => Promise<void>): Promise<void> {
  const srv = await startKeyedServer({ analyzer, client: "web", plan: "free", config });
  try {
    await fn(srv, srv.key);
  } finally {
    await srv.close();
  }
}

const preflight = (origin: string, method = "POST", headers = "content-type, x-api-key") => ({
  origin,
  "access-control-request-method": method,
  "access-control-request-headers": headers,
});

describe("CORS with PALM_CORS_ORIGINS=https://app.example.com", () => {
  const config = { corsOrigins: [APP] };

  it("answers a preflight for REST, Connect and gRPC-Web paths from the allowed origin with 204 and the allowances", async () => {
    await withServer(config, async (srv) => {
      for (const path of ["/v1/palm/analyze", "/palm.v1.PalmService/Analyze"]) {
        const res = await request(
          `${srv.url}${path}`,
          "OPTIONS",
          preflight(APP, "POST", "content-type, x-api-key, x-grpc-web, x-user-agent, grpc-timeout"),
        );
        expect(res.status).toBe(204);
        expect(res.headers["access-control-allow-origin"]).toBe(APP);
        expect(res.headers["access-control-allow-methods"]).toBe("GET, POST");
        const allowed = String(res.headers["access-control-allow-headers"]).split(", ");
        expect(allowed).toEqual(
          expect.arrayContaining(["content-type", "x-api-key", "x-grpc-web", "x-user-agent", "grpc-timeout", "connect-protocol-version"]),
        );
        expect(res.headers["access-control-max-age"]).toBe("7200");
        expect(res.headers.vary).toMatch(/Origin/);
      }
    });
  });

  it("refuses a preflight from another origin with 403 and no allowance", async () => {
    await withServer(config, async (srv) => {
      const res = await request(`${srv.url}/v1/palm/analyze`, "OPTIONS", preflight("https://evil.example.net"));
      expect(res.status).toBe(403);
      expect(res.headers["access-control-allow-origin"]).toBeUndefined();
    });
  });

  it("exposes the request id, the quota and the rate limit headers on an answer to the allowed origin, errors included", async () => {
    await withServer(config, async (srv, key) => {
      const res = await request(
        `${srv.url}/v1/palm/analyze`,
        "POST",
        { origin: APP, "x-api-key": key, "content-type": "application/json" },
        "{}",
      );
      expect(res.status).toBe(400); // missing_image: a recognised key, so the quota headers are there
      expect(res.headers["access-control-allow-origin"]).toBe(APP);
      const exposed = String(res.headers["access-control-expose-headers"]).split(", ");
      expect(exposed).toEqual(
        expect.arrayContaining([
          "x-request-id",
          "x-monthly-quota-limit",
          "x-monthly-quota-remaining",
          "x-monthly-quota-reset",
          "retry-after",
          "ratelimit-policy",
          "ratelimit",
          "grpc-status",
          "grpc-message",
        ]),
      );
      for (const h of [
        "x-request-id",
        "x-monthly-quota-limit",
        "x-monthly-quota-remaining",
        "x-monthly-quota-reset",
        "ratelimit-policy",
        "ratelimit",
      ])
        expect(res.headers[h]).toBeDefined();
      const other = await request(`${srv.url}/v1/palm/health`, "GET", { origin: "https://evil.example.net" });
      expect(other.status).toBe(200);
      expect(other.headers["access-control-allow-origin"]).toBeUndefined();
    });
  });
});

describe("CORS defaults and wildcard", () => {
  it("allows no other origin by default", async () => {
    await withServer({}, async (srv) => {
      const res = await request(`${srv.url}/v1/palm/analyze`, "OPTIONS", preflight(APP));
      expect(res.status).toBe(403);
      const get = await request(`${srv.url}/v1/palm/health`, "GET", { origin: APP });
      expect(get.headers["access-control-allow-origin"]).toBeUndefined();
    });
  });

  it("allows any origin with *, echoing it", async () => {
    await withServer({ corsOrigins: ["*"] }, async (srv) => {
      const res = await request(`${srv.url}/v1/palm/analyze`, "OPTIONS", preflight("http://localhost:5173"));
      expect(res.status).toBe(204);
      expect(res.headers["access-control-allow-origin"]).toBe("http://localhost:5173");
    });
  });

  it("leaves an OPTIONS without a preflight's headers to the API (405 method_not_allowed)", async () => {
    await withServer({ corsOrigins: ["*"] }, async (srv) => {
      const res = await request(`${srv.url}/v1/palm/analyze`, "OPTIONS", {});
      expect(res.status).toBe(405);
      expect(JSON.parse(res.body).error.code).toBe("method_not_allowed");
    });
  });
});

const browserPath = findChromium();
describe.skipIf(!browserPath.path)(`a browser page on another origin${browserPath.path ? "" : ` [skipped: ${browserPath.why}]`}`, () => {
  let browser: Browser;
  let site: http.Server;
  let origin: string;
  beforeAll(async () => {
    // The other origin: a page served from another port of 127.0.0.1.
    site = http.createServer((_req, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<!doctype html><title>other origin</title>");
    });
    await new Promise<void>((r) => site.listen(0, "127.0.0.1", () => r()));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    browser = await chromium.launch({ executablePath: browserPath.path, args: ["--no-sandbox"] });
  });
  afterAll(async () => {
    await browser?.close();
    await new Promise((r) => site?.close(r));
  });

  it("calls gRPC-Web and REST across origins when the origin is allowed, and is blocked when not", async () => {
    await withServer({ corsOrigins: [origin] }, async (srv, key) => {
      const page = await browser.newPage();
      await page.goto(origin);
      const out = await page.evaluate(
        async ({ api, key }) => {
          // gRPC-Web by hand: one uncompressed envelope holding an empty HealthRequest.
          const grpcWeb = async (method: string, headers: Record<string, string>) => {
            const res = await fetch(`${api}/palm.v1.PalmService/${method}`, {
              method: "POST",
              headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...headers },
              body: new Uint8Array([0, 0, 0, 0, 0]),
            });
            const bytes = new Uint8Array(await res.arrayBuffer());
            const frames: { flag: number; data: number[] }[] = [];
            for (let i = 0; i + 5 <= bytes.length; ) {
              const len = new DataView(bytes.buffer, i + 1, 4).getUint32(0);
              frames.push({ flag: bytes[i], data: [...bytes.subarray(i + 5, i + 5 + len)] });
              i += 5 + len;
            }
            return { status: res.status, grpcStatus: res.headers.get("grpc-status"), requestId: res.headers.get("x-request-id"), frames };
          };
          const health = await grpcWeb("Health", {});
          const refused = await grpcWeb("Analyze", { "x-api-key": "palm_live_00000000000000000000000000000000" });
          const rest = await fetch(`${api}/v1/palm/analyze`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-api-key": key },
            body: "{}",
          });
          return {
            health,
            refused,
            rest: {
              status: rest.status,
              remaining: rest.headers.get("x-monthly-quota-remaining"),
              requestId: rest.headers.get("x-request-id"),
            },
          };
        },
        { api: srv.url, key },
      );
      expect(out.health.status).toBe(200);
      expect(out.health.requestId).toMatch(/^palm_/);
      const data = out.health.frames.find((f) => f.flag === 0)!;
      expect(fromBinary(HealthResponseSchema, new Uint8Array(data.data)).status).toBe("ok");
      const trailer = new TextDecoder().decode(new Uint8Array(out.health.frames.find((f) => f.flag === 0x80)!.data));
      expect(trailer).toMatch(/grpc-status: ?0/);
      // A refused key: UNAUTHENTICATED (16), readable by the page's script.
      const refusedTrailer = out.refused.frames.find((f) => f.flag === 0x80);
      const refusedStatus =
        out.refused.grpcStatus ?? /grpc-status: ?(\d+)/.exec(new TextDecoder().decode(new Uint8Array(refusedTrailer?.data ?? [])))?.[1];
      expect(refusedStatus).toBe("16");
      expect(out.rest).toMatchObject({ status: 400, remaining: "100" });
      expect(out.rest.requestId).toMatch(/^palm_/);
      await page.close();
    });

    await withServer({}, async (srv) => {
      const page = await browser.newPage();
      await page.goto(origin);
      const error = await page.evaluate(async (api) => {
        try {
          await fetch(`${api}/v1/palm/health`);
          return "no error";
        } catch (e) {
          return (e as Error).name;
        }
      }, srv.url);
      expect(error).toBe("TypeError"); // the browser blocks the answer: no Access-Control-Allow-Origin
      await page.close();
    });
  });
});
