/**
 * The network server: ONE port for gRPC (HTTP/2 cleartext), gRPC-Web, Connect and REST. This file
 * builds each step of the request path and hands them to request-path.ts, which shows the whole
 * path in order; the HTTP front (http-front.ts) runs it for every request.
 */
import { setMaxListeners } from "node:events";
import type { Store } from "../auth/store.js";
import type { Config } from "../config.js";
import type { Analyzer } from "../inference/analyzer-types.js";
import { createCors } from "../http/cors.js";
import { createSiteHandler } from "../http/site-handler.js";
import { createWebHandler } from "../http/web-handler.js";
import { createMetrics, createMetricsServer } from "../ops/metrics.js";
import { createReadiness } from "../ops/readiness.js";
import type { Logger } from "../log.js";
import { createAccessCheck } from "../auth/access-check.js";
import { MAX_BODY_BYTES } from "../limits.js";
import { createRestHandler } from "../rest/rest-handler.js";
import { createRestTable, restRoutesOf } from "../rest/rest-routes.js";
import { REST_SERVICES } from "../rest/rest-services.js";
import { createAccessLog } from "./access-log.js";
import { createDoor } from "./door.js";
import { keyHashOf } from "../auth/api-key.js";
import { createRateGate, type RateGate } from "../auth/rate-gate.js";
import type { ConnectError } from "@connectrpc/connect";
import { type Exchange, kPrincipal } from "../request/context-keys.js";
import type { NodeResponse } from "../wire/http.js";
import { HttpFront } from "./http-front.js";
import { createRefusalPace } from "./refusal-pace.js";
import { createRequestPath } from "./request-path.js";
import { createRpcAdapter } from "./rpc-adapter.js";
import { createInterceptors, createServices, PUBLIC_METHODS, registerServices } from "./routes.js";

/** PalmServerOptions configure {@link createPalmServer}. */
export interface PalmServerOptions {
  analyzer: Analyzer;
  store: Store;
  config: Config;
  logger: Logger;
  /** Clock for quota periods (tests). Default: now. */
  now?: () => Date;
  /**
   * HTTP/2 receive windows in bytes. Default {@link H2_STREAM_WINDOW} per stream and
   * {@link H2_CONNECTION_WINDOW} per connection (`npm run bench -- --scenario upload-window`
   * compares them with HTTP/2's 65,535).
   */
  h2Windows?: { stream: number; connection: number };
  /** The development key, pre-filled on the demo page (in-memory store only). Default: none. */
  devKey?: string;
}

/** PalmServer is a listening (or ready to listen) service instance. */
export interface PalmServer {
  /** listen binds `config.port` / `config.host` (or the given ones); resolves with the bound port. */
  listen(port?: number, host?: string): Promise<number>;
  /** The bound port (after listen). */
  readonly port: number;
  /** The bound port of `GET /metrics` when PALM_METRICS_PORT gives it its own (after listen). */
  readonly metricsPort: number | undefined;
  /**
   * shutdown stops accepting, lets in-flight requests finish for up to `graceMs` (default
   * config.shutdownGraceMs), then cancels what is left and closes every connection.
   * The store and the analyzer belong to the caller and stay open.
   */
  shutdown(graceMs?: number): Promise<void>;
}

/**
 * HTTP/2 receive windows: a stream, like its connection, may send 8 MiB (the body limit) ahead,
 * so one photo goes up without waiting for a window update (HTTP/2's 64 KiB default costs a
 * round trip per 64 KiB; docs/decisions/http2-windows-8mib.md). What a connection's streams may
 * buffer together stays bounded by the connection window; a request is still refused past
 * MAX_BODY_BYTES. A connection gets both windows with its first request that comes with a recognised
 * key: before that, 64 KiB each, so keyless uploads cost the server next to nothing.
 */
export const H2_STREAM_WINDOW = MAX_BODY_BYTES;
export const H2_CONNECTION_WINDOW = MAX_BODY_BYTES;

/** createPalmServer wires the routes, interceptors and REST surface onto one port. */
export function createPalmServer(options: PalmServerOptions): PalmServer {
  const { config, logger } = options;
  const windows = options.h2Windows ?? { stream: H2_STREAM_WINDOW, connection: H2_CONNECTION_WINDOW };
  const shutdownController = new AbortController();
  const stopping = new AbortController();
  // Every call in flight links its signal to the shutdown signal until it ends (health Watch
  // streams to `stopping`): as many listeners as calls, not a leak past Node's default of 10
  // (rest.spec "holds more calls at once than Node's listener bound").
  setMaxListeners(0, shutdownController.signal, stopping.signal);
  const services = createServices({ analyzer: options.analyzer, config, stopping: stopping.signal });
  const metrics = createMetrics({ analyzer: options.analyzer });
  const metricsServer = config.metricsPort === undefined ? undefined : createMetricsServer(metrics);
  const interceptors = createInterceptors({ store: options.store, config, logger, now: options.now });
  const rest = createRestHandler({
    services,
    interceptors,
    bodyTimeoutMs: config.bodyTimeoutMs,
    codecThreads: config.restCodecThreads,
    shutdownSignal: shutdownController.signal,
  });
  const restTable = createRestTable(restRoutesOf(REST_SERVICES));
  const rpc = createRpcAdapter({
    routes: registerServices(services),
    interceptors,
    // Request messages up to the REST body limit: the adapter refuses a larger one with SPEC's
    // image_too_large as its envelope header arrives; the 5 MiB image limit is checked by the
    // service (test/integration/protocols.spec.ts).
    maxBodyBytes: MAX_BODY_BYTES,
    readMaxBytes: MAX_BODY_BYTES,
    // Responses are mostly JPEG and PNG, already compressed: never compressed
    // (docs/decisions/no-response-compression.md).
    compressMinBytes: Number.MAX_SAFE_INTEGER,
    shutdownSignal: shutdownController.signal,
  });
  const gate = createRateGate({ store: options.store, limits: config.rateLimits, leaseMs: config.quotaLeaseMs, logger });
  const door = createDoor({
    rpc: rpc.paths,
    rest: restTable,
    publicMethods: PUBLIC_METHODS,
    checkAccess: createAccessCheck({ store: options.store, planLimits: config.planLimits, now: options.now }),
    refusedLocally: (header) => {
      const keyHash = keyHashOf(header);
      return keyHash === undefined ? undefined : gate.refusedLocally(keyHash);
    },
  });
  // In front of the RPCs and REST: CORS, the demo page, the docs, readiness and metrics (src/http).
  const site = createSiteHandler({
    cors: createCors({ origins: config.corsOrigins }),
    web: createWebHandler({ devKey: options.devKey }),
    readiness: createReadiness({
      analyzer: options.analyzer,
      store: options.store,
      stopping: stopping.signal,
      storeTimeoutMs: config.redisCommandTimeoutMs,
      onStoreError: () => metrics.storeError("readiness"),
    }),
    metrics: metricsServer ? undefined : metrics,
  });
  const accessLog = createAccessLog({ logger, counter: metrics });
  const front = new HttpFront({
    config,
    logger,
    accessLog,
    handler: createRequestPath({ accessLog, site, door, rpc, rest, windows, limits: createLimitsStep(gate), pace: createRefusalPace() }),
    answersContinue: (path) => restTable.has(path) || rpc.paths.has(path),
  });

  let port = 0;
  let metricsPort: number | undefined;
  return {
    get port() {
      return port;
    },
    get metricsPort() {
      return metricsPort;
    },
    async listen(p = config.port, host = config.host): Promise<number> {
      port = await front.listen(p, host);
      if (metricsServer && config.metricsPort !== undefined) metricsPort = await metricsServer.listen(config.metricsPort, host);
      return port;
    },
    async shutdown(graceMs = config.shutdownGraceMs): Promise<void> {
      if (stopping.signal.aborted) return;
      stopping.abort(); // health: NOT_SERVING, Watch streams get it and end
      await front.drain(graceMs);
      shutdownController.abort(); // cancel whatever is left (its quota is refunded)
      const abandoned = front.inFlight;
      await front.close();
      await metricsServer?.close();
      await rest.close();
      logger.info({ abandoned }, "server stopped");
    },
  };
}

/**
 * createLimitsStep is the request path's per-client limits step: one step of the gate for the
 * request's principal; its place in flight is given back when the response closes (sent, reset or
 * timed out), and its RateLimit headers go on the answer. The close listener is in place before
 * the store is asked (test/integration/rate-limit.spec.ts, a client that resets).
 */
function createLimitsStep(gate: RateGate): (res: NodeResponse, exchange: Exchange) => Promise<ConnectError | undefined> {
  return async (res, exchange) => {
    const principal = exchange.contextValues.get(kPrincipal);
    if (!principal) return undefined;
    const closed = onClose(res);
    try {
      const hold = await gate.enter(principal);
      closed(hold.leave);
      for (const [name, value] of hold.headers) if (!res.headersSent) res.setHeader(name, value);
      return undefined;
    } catch (e) {
      return exchange.fail(e);
    }
  };
}

/**
 * onClose returns a function that runs its argument once `res` has closed, at once when it
 * already has.
 */
function onClose(res: NodeResponse): (fn: () => void) => void {
  const stream = "stream" in res ? res.stream : undefined;
  let closed = stream ? stream.closed || stream.destroyed : res.destroyed || res.closed;
  const waiting: (() => void)[] = [];
  res.once("close", () => {
    closed = true;
    for (const fn of waiting.splice(0)) fn();
  });
  return (fn) => {
    if (closed) fn();
    else waiting.push(fn);
  };
}
