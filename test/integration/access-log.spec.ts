/**
 * The access log on a real server: one line and one count for every answer, written when the
 * response closes, whatever answered it (the service, the door, an unknown path), with the
 * caller's protocol. The engine here is a stand-in that fails, since no real model can be made
 * to fault on demand.
 */
import type http2 from "node:http2";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemoryStore } from "../../src/auth/memory-store.js";
import type { Analyzer } from "../../src/inference/analyzer-types.js";
import { createPalmServer, type PalmServer } from "../../src/server/server.js";
import { createTestConfig } from "../helpers/config.js";
import { openH2Session } from "../helpers/h2.js";
import { registerKey } from "../helpers/keys.js";
import { capturingLogger } from "../helpers/logs.js";

const faulty: Analyzer = {
  model: "test-faulty",
  analyze: async () => {
    throw new Error("db password is hunter2");
  },
  close: async () => {},
};

let server: PalmServer;
let url: string;
let key: string;
const lines: any[] = [];
beforeAll(async () => {
  const store = createMemoryStore();
  key = await registerKey(store, "acme", "free");
  server = createPalmServer({
    analyzer: faulty,
    store,
    config: createTestConfig({ port: 0, host: "127.0.0.1" }),
    logger: capturingLogger(lines),
  });
  url = `http://127.0.0.1:${await server.listen()}`;
});
afterAll(() => server?.shutdown(500));

/** lineOf waits for the log line of `requestId` (written when the response closes). */
async function lineOf(requestId: string | null | undefined): Promise<any> {
  for (let i = 0; i < 100 && !lines.some((l) => l.request_id === requestId && l.msg !== "site"); i++)
    await new Promise((r) => setTimeout(r, 10));
  const found = lines.filter((l) => l.request_id === requestId);
  expect(found).toHaveLength(1);
  return found[0];
}

/** sample reads one counter from /metrics. */
async function sample(labels: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`palm_requests_total{${labels}}`));
  return line === undefined ? 0 : Number(line.split(" ").at(-1));
}

describe("the access log", () => {
  it("logs a fault at error with its cause and the principal, and tells the client nothing of it", async () => {
    const image = readFileSync(new URL("../../examples/sample-palm.jpg", import.meta.url)).toString("base64");
    const res = await fetch(`${url}/v1/palm/analyze`, {
      method: "POST",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body: JSON.stringify({ image }),
    });
    expect(res.status).toBe(500);
    expect(await res.text()).not.toContain("hunter2");
    const line = await lineOf(res.headers.get("x-request-id"));
    expect(line).toMatchObject({ level: 50, protocol: "rest", method: "palm.v1.PalmService/Analyze", client_id: "acme", status: 500 });
    expect(line.code).toBe("internal_error");
    expect(line.err.message).toBe("db password is hunter2");
    expect(line.latency_ms).toBeTypeOf("number");
  });

  it("writes and counts an unknown path with the caller's protocol: gRPC, Connect and REST", async () => {
    const session = await openH2Session(url);
    try {
      const headers = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
        const stream = session.request({ ":method": "POST", ":path": "/nope.v1.Nope/Call", "content-type": "application/grpc" });
        stream.on("response", resolve);
        stream.on("error", reject);
        stream.end();
        stream.resume();
      });
      expect(headers["grpc-status"]).toBe("12");
      expect(await lineOf(String(headers["x-request-id"]))).toMatchObject({ protocol: "grpc", status: 404, code: "not_found" });
    } finally {
      session.close();
    }
    const connect = await fetch(`${url}/nope.v1.Nope/Call`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-protocol-version": "1" },
      body: "{}",
    });
    expect(await lineOf(connect.headers.get("x-request-id"))).toMatchObject({ protocol: "connect", status: 404, code: "not_found" });
    const rest = await fetch(`${url}/v1/palm/analyze`);
    expect(rest.status).toBe(405);
    expect(await lineOf(rest.headers.get("x-request-id"))).toMatchObject({
      protocol: "rest",
      method: "GET /v1/palm/analyze",
      code: "method_not_allowed",
    });
    expect(await sample('procedure="unmatched",protocol="grpc",code="not_found"')).toBe(1);
    expect(await sample('procedure="unmatched",protocol="connect",code="not_found"')).toBe(1);
    expect(await sample('procedure="unmatched",protocol="rest",code="method_not_allowed"')).toBe(1);
  });

  it("leaves the site's own paths out of the request lines and counts", async () => {
    const before = lines.length;
    expect((await fetch(`${url}/`)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 50));
    expect(lines.slice(before).filter((l) => l.msg === "request")).toEqual([]);
  });
});
