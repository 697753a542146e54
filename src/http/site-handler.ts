/**
 * What the port serves besides the RPCs and REST: CORS preflights (for every path), the demo
 * page, the docs, `/openapi.json`, `/v1/palm/ready` and `/metrics`. Everything else is left to
 * the door (src/server/door.ts), with CORS response headers added for an allowed origin.
 */
import type { PalmMetrics } from "../ops/metrics.js";
import type { Readiness } from "../ops/readiness.js";
import { pathOf, type NodeHandlerFn } from "../wire/http.js";
import type { Cors } from "./cors.js";
import type { WebHandler } from "./web-handler.js";

/** READY_PATH is the readiness endpoint. */
export const READY_PATH = "/v1/palm/ready";
/** METRICS_PATH is the Prometheus scrape endpoint. */
export const METRICS_PATH = "/metrics";

/** SiteHandlerOptions configure {@link createSiteHandler}. */
export interface SiteHandlerOptions {
  cors: Cors;
  web: WebHandler;
  readiness: Readiness;
  /** Metrics served on this port; undefined when they have a port of their own. */
  metrics?: PalmMetrics;
}

/** SiteHandler answers the site's own paths: true when it answered `req`, false to leave it to the door. */
export type SiteHandler = (req: Parameters<NodeHandlerFn>[0], res: Parameters<NodeHandlerFn>[1]) => boolean;

/** createSiteHandler returns the {@link SiteHandler} in front of the door. */
export function createSiteHandler(options: SiteHandlerOptions): SiteHandler {
  const { cors, web, readiness, metrics } = options;
  return (req, res) => {
    if (cors.preflight(req, res)) return true;
    const path = pathOf(req);
    if (!web.isPagePath(path)) cors.decorate(req, res);
    if (web.serve(req, res)) return true;
    const read = req.method === "GET" || req.method === "HEAD";
    if (read && path === READY_PATH) {
      readiness.check().then(
        (report) => {
          const body = Buffer.from(JSON.stringify(report));
          res.writeHead(report.status === "ready" ? 200 : 503, {
            "content-type": "application/json",
            "content-length": String(body.byteLength),
            "cache-control": "no-store",
          });
          if (req.method === "HEAD") res.end();
          else res.end(body);
        },
        () => {
          res.writeHead(503, { "content-type": "application/json" });
          res.end(JSON.stringify({ status: "not_ready" }));
        },
      );
      return true;
    }
    if (read && metrics && path === METRICS_PATH) {
      metrics.serve(req, res);
      return true;
    }
    return false;
  };
}
