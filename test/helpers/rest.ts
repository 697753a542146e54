/**
 * REST test helpers: posting JSON, asserting SPEC.md's error body, and raw HTTP/1.1 requests
 * whose body the test controls byte by byte.
 */
import http from "node:http";
import { expect } from "vitest";

/** postAnalyze POSTs `body` (object → JSON) to /v1/palm/analyze. */
export async function postAnalyze(
  baseUrl: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ res: Response; json: any }> {
  const res = await fetch(`${baseUrl}/v1/palm/analyze`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return { res, json: text === "" ? undefined : JSON.parse(text) };
}

/** expectErrorBody asserts SPEC.md section 6's error body, status and request id header. */
export function expectErrorBody(res: Response, json: any, status: number, code: string): void {
  expect({ status: res.status, code: json?.error?.code }).toEqual({ status, code });
  expect(res.headers.get("content-type")).toBe("application/json");
  expect(Object.keys(json)).toEqual(["error"]);
  expect(Object.keys(json.error).sort()).toEqual(["code", "message", "request_id", "status"]);
  expect(json.error.status).toBe(status);
  expect(json.error.message).toBeTypeOf("string");
  expect(json.error.message.length).toBeGreaterThan(0);
  expect(json.error.request_id).toMatch(/^palm_[0-9A-HJKMNP-TV-Z]{26}$/);
  expect(res.headers.get("x-request-id")).toBe(json.error.request_id);
}

/** RawResponse is what {@link rawRequest} saw. */
export interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Bytes of the request body written before the response arrived. */
  written: number;
}

/**
 * rawRequest sends headers, then writes `chunk` every `intervalMs` until `totalBytes` are sent
 * (never ending the body if `end` is false), and resolves as soon as a full response arrives.
 */
export function rawRequest(options: {
  port: number;
  path?: string;
  method?: string;
  headers: Record<string, string>;
  chunk: Buffer;
  totalBytes: number;
  intervalMs?: number;
  end?: boolean;
}): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    let written = 0;
    let timer: NodeJS.Timeout | undefined;
    const req = http.request({
      host: "127.0.0.1",
      port: options.port,
      path: options.path ?? "/v1/palm/analyze",
      method: options.method ?? "POST",
      headers: options.headers,
      agent: false,
    });
    req.on("response", (res) => {
      responded = true;
      clearTimeout(timer);
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (body += d));
      res.on("end", () => {
        req.destroy();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, written });
      });
    });
    let responded = false;
    req.on("error", (e) => {
      if (!responded) reject(e); // a reset after the response is the server ending the upload
    });
    const pump = () => {
      if (written >= options.totalBytes) {
        if (options.end !== false) req.end();
        return;
      }
      const n = Math.min(options.chunk.byteLength, options.totalBytes - written);
      written += n;
      const ok = req.write(options.chunk.subarray(0, n));
      const next = () => (timer = setTimeout(pump, options.intervalMs ?? 0));
      if (ok) next();
      else req.once("drain", next);
    };
    req.flushHeaders();
    pump();
  });
}

/**
 * postExpectingContinue POSTs `body` over HTTP/1.1 with "Expect: 100-continue", sending the body
 * only once the server answers 100; resolves with the final status and whether the 100 came.
 */
export function postExpectingContinue(
  port: number,
  path: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; continued: boolean }> {
  return new Promise((resolve, reject) => {
    let continued = false;
    const req = localPost(port, path, { ...headers, expect: "100-continue", "content-length": String(Buffer.byteLength(body)) });
    req.on("continue", () => {
      continued = true;
      req.end(body);
    });
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, continued }));
      if (!continued) req.destroy();
    });
    req.on("error", (e) => (continued ? reject(e) : undefined));
    req.flushHeaders();
  });
}

/** localPost starts a POST to 127.0.0.1:`port` on a connection of its own (no agent); the caller sends the body. */
export function localPost(port: number, path: string, headers: Record<string, string>): http.ClientRequest {
  return http.request({ host: "127.0.0.1", port, path, method: "POST", agent: false, headers });
}
