/**
 * CORS for browsers on other origins (PALM_CORS_ORIGINS): preflights answered for every API path
 * (REST, Connect, gRPC-Web), the response headers a client needs exposed (request id, quota,
 * Retry-After, RateLimit-Policy and RateLimit, gRPC-Web's status headers). The page the service
 * serves itself is same-origin and needs none of this. test/integration/cors.spec.ts pins them.
 */
import { cors as connectCors } from "@connectrpc/connect";
import type { NodeHandlerFn } from "../wire/http.js";

type NodeRequest = Parameters<NodeHandlerFn>[0];
type NodeResponse = Parameters<NodeHandlerFn>[1];

/** CorsOptions configure {@link createCors}. */
export interface CorsOptions {
  /** Allowed origins, exactly as browsers send them ("https://app.example.com"); "*" allows any. Default: none. */
  origins: readonly string[];
  /** Seconds a browser may cache a preflight answer. Default 7200 (Chromium's cap). */
  maxAgeSeconds?: number;
}

/** ALLOWED_HEADERS: what Connect and gRPC-Web clients send, plus our key header. */
export const CORS_ALLOWED_HEADERS = Object.freeze([...new Set([...connectCors.allowedHeaders, "x-api-key"].map((h) => h.toLowerCase()))]);

/** EXPOSED_HEADERS: the request id, the quota, Retry-After, the rate limit, and gRPC-Web's status headers. */
export const CORS_EXPOSED_HEADERS = Object.freeze([
  ...new Set(
    [
      "x-request-id",
      "x-monthly-quota-limit",
      "x-monthly-quota-remaining",
      "x-monthly-quota-reset",
      "retry-after",
      "ratelimit-policy",
      "ratelimit",
      ...connectCors.exposedHeaders,
    ].map((h) => h.toLowerCase()),
  ),
]);

/** ALLOWED_METHODS: GET and POST (REST and the RPC protocols); OPTIONS is the preflight itself. */
export const CORS_ALLOWED_METHODS = Object.freeze(["GET", "POST"]);

/** Cors applies the policy to one request. */
export interface Cors {
  /**
   * preflight answers an OPTIONS preflight (Origin and Access-Control-Request-Method present) and
   * returns true: 204 with the allowances for an allowed origin, 403 without them otherwise.
   * Any other request: returns false and answers nothing.
   */
  preflight(req: NodeRequest, res: NodeResponse): boolean;
  /** decorate sets the CORS response headers of an actual request from an allowed origin. */
  decorate(req: NodeRequest, res: NodeResponse): void;
}

/** createCors returns the policy for `options.origins`. */
export function createCors(options: CorsOptions): Cors {
  const any = options.origins.includes("*");
  const allowed = new Set(options.origins);
  const maxAge = String(options.maxAgeSeconds ?? 7200);
  const isAllowed = (origin: string) => any || allowed.has(origin);
  const vary = (res: NodeResponse) => {
    const prev = res.getHeader("vary");
    if (prev === undefined) res.setHeader("vary", "Origin");
  };

  return {
    preflight(req, res) {
      const origin = req.headers.origin;
      const method = req.headers["access-control-request-method"];
      if (req.method !== "OPTIONS" || origin === undefined || method === undefined) return false;
      if (!isAllowed(origin)) {
        res.writeHead(403, { vary: "Origin", "content-length": "0" });
        res.end();
        return true;
      }
      res.writeHead(204, {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": CORS_ALLOWED_METHODS.join(", "),
        "access-control-allow-headers": CORS_ALLOWED_HEADERS.join(", "),
        "access-control-max-age": maxAge,
        vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
      });
      res.end();
      return true;
    },
    decorate(req, res) {
      const origin = req.headers.origin;
      if (origin === undefined || !isAllowed(origin)) return;
      // The origin is echoed (never "*") so that caches keyed by Vary: Origin stay correct.
      res.setHeader("access-control-allow-origin", origin);
      res.setHeader("access-control-expose-headers", CORS_EXPOSED_HEADERS.join(", "));
      vary(res);
    },
  };
}
