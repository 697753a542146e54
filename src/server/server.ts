/**
 * The network server: ONE port for gRPC (HTTP/2 cleartext), gRPC-Web, Connect and REST.
 *
 * Node 20's plaintext `http2.createServer` does not fall back to HTTP/1.1 (its `allowHTTP1` is
 * honoured with TLS only), so a tiny TCP front reads the first bytes of each connection and hands
 * it to an HTTP/2 server (client preface "PRI * HTTP/2.0") or an HTTP/1.1 server; both run the same
 * handler: the site (src/http), then the door (door.ts), which routes and admits every API request
 * from its headers and hands it to connect's handler (rpc-adapter.ts) or to REST (src/rest).
 */
import http from "node:http";
import http2 from "node:http2";
import net, { type AddressInfo } from "node:net";
import type { ServerHttp2Session } from "node:http2";
import type { Store } from "../auth/store.js";
import type { Config } from "../config.js";
import type { Analyzer } from "../inference/analyzer-types.js";
import { ERRORS } from "../errors.js";
import { createCors } from "../http/cors.js";
import { createSiteHandler } from "../http/site-handler.js";
import { createWebHandler } from "../http/web-handler.js";
import { createMetrics, createMetricsServer } from "../ops/metrics.js";
import { createReadiness } from "../ops/readiness.js";
import type { Logger } from "../log.js";
import { createKeyCheck } from "../auth/api-key-interceptor.js";
import { quotaLimitOf } from "../auth/quota-interceptor.js";
import { errorPayload, pathOf, type NodeHandlerFn } from "../api/http.js";
import { MAX_BODY_BYTES } from "../api/limits.js";
import { createRestHandler } from "../rest/rest-handler.js";
import { createRestTable, restRoutesOf } from "../rest/rest-routes.js";
import { createDoor } from "./door.js";
import { newRequestId, REQUEST_ID_HEADER } from "../api/request-id.js";
import { respond } from "./respond.js";
import { createRpcAdapter } from "./rpc-adapter.js";
import { REST_SERVICES } from "../rest/rest-services.js";
import { createInterceptorChain, createServices, PUBLIC_METHODS, registerServices } from "./routes.js";

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

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * HTTP/2 receive windows: a stream, like its connection, may send 8 MiB (the body limit) ahead,
 * so one photo goes up without waiting for a window update (HTTP/2's 64 KiB default costs a
 * round trip per 64 KiB; docs/decisions/http2-windows-8mib.md). What a connection's streams may
 * buffer together stays bounded by the connection window; a request is still refused past
 * MAX_BODY_BYTES.
 */
export const H2_STREAM_WINDOW = MAX_BODY_BYTES;
export const H2_CONNECTION_WINDOW = MAX_BODY_BYTES;

/** createPalmServer wires the routes, interceptors and REST surface onto one port. */
export function createPalmServer(options: PalmServerOptions): PalmServer {
  const { config, logger } = options;
  const windows = options.h2Windows ?? { stream: H2_STREAM_WINDOW, connection: H2_CONNECTION_WINDOW };
  let closing = false;
  const shutdownController = new AbortController();
  const stopping = new AbortController();
  const services = createServices({ analyzer: options.analyzer, config, stopping: stopping.signal });
  const metrics = createMetrics({ analyzer: options.analyzer });
  const metricsServer = config.metricsPort === undefined ? undefined : createMetricsServer(metrics);
  const chain = createInterceptorChain({ store: options.store, config, logger, now: options.now, metrics: metrics.interceptor });
  const rest = createRestHandler({
    services,
    interceptors: chain.all,
    bodyTimeoutMs: config.bodyTimeoutMs,
    codecThreads: config.restCodecThreads,
    shutdownSignal: shutdownController.signal,
  });
  const restTable = createRestTable(restRoutesOf(REST_SERVICES));
  const rpc = createRpcAdapter({
    routes: registerServices(services),
    interceptors: chain.all,
    logger,
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
  // Route, key and plan from the headers, before any body is read, for every protocol (door.ts).
  const checkKey = createKeyCheck(options.store);
  const door = createDoor({
    rpc: rpc.paths,
    rest: restTable,
    publicMethods: PUBLIC_METHODS,
    admit: async (header) => {
      const principal = await checkKey(header);
      quotaLimitOf(config.planLimits, principal.plan);
      return principal;
    },
    outer: chain.outer,
    logger,
    serveRpc: rpc.serve,
    serveRest: (req, res, route, call) => void rest.serve(req, res, route, call).then((answer) => respond(req, res, answer)),
  });

  // In front of the RPCs and REST: CORS, the demo page, the docs, readiness and metrics (src/http).
  const site = createSiteHandler({
    next: door,
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

  let inFlight = 0;
  let drained: (() => void) | undefined;
  // Slow-client guard for every protocol: the whole request must arrive within this bound.
  const receiveTimeoutMs = config.headersTimeoutMs + config.bodyTimeoutMs + 1000;

  const handle: NodeHandlerFn = (req, res) => {
    inFlight++;
    const timer = setTimeout(() => {
      if (req.complete) return;
      if ("stream" in req) req.stream.close(http2.constants.NGHTTP2_CANCEL);
      else req.socket.destroy();
    }, receiveTimeoutMs);
    timer.unref();
    req.once("end", () => clearTimeout(timer));
    res.once("close", () => {
      clearTimeout(timer);
      inFlight--;
      if (closing) h1.closeIdleConnections();
      if (inFlight === 0) drained?.();
    });
    if (closing && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    site(req, res);
  };

  const h1 = http.createServer(
    {
      headersTimeout: config.headersTimeoutMs,
      requestTimeout: receiveTimeoutMs,
      keepAliveTimeout: 5000,
      connectionsCheckingInterval: 1000,
    },
    handle,
  );
  // Request headers not received in time (PALM_HEADERS_TIMEOUT_MS): SPEC.md's 504 `timeout` in
  // our JSON instead of Node's bare 408. Other malformed HTTP keeps Node's answers.
  h1.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => {
    if (err.code === "ECONNRESET" || !socket.writable) return void socket.destroy();
    if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
      const requestId = newRequestId();
      logger.info({ request_id: requestId, protocol: "http", status: 504, code: "timeout" }, "request headers not received in time");
      const status = ERRORS.timeout.httpStatus;
      const body = errorPayload("timeout", "The request headers were not received in time.", status, requestId);
      socket.write(
        `HTTP/1.1 ${status} Gateway Timeout\r\ncontent-type: application/json\r\ncontent-length: ${body.byteLength}\r\n` +
          `${REQUEST_ID_HEADER}: ${requestId}\r\nconnection: close\r\n\r\n`,
      );
      socket.end(body);
      return;
    }
    const tooLarge = err.code === "HPE_HEADER_OVERFLOW";
    socket.end(
      tooLarge
        ? "HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\r\n"
        : "HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n",
    );
  });
  // h1 never listens itself (the TCP front does); 'listening' starts its timeout checks.
  h1.emit("listening");
  const h2 = http2.createServer({ settings: { maxConcurrentStreams: 256, initialWindowSize: windows.stream } }, handle);
  // "Expect: 100-continue": REST answers it after the key check (rest-handler.ts); everything
  // else gets the 100 at once, as Node would do by itself.
  const checkContinue: NodeHandlerFn = (req, res) => {
    if (!restTable.has(pathOf(req))) res.writeContinue();
    handle(req, res);
  };
  h1.on("checkContinue", checkContinue);
  h2.on("checkContinue", checkContinue);
  h2.setTimeout(config.idleTimeoutMs);
  const sessions = new Set<ServerHttp2Session>();
  h2.on("session", (s: ServerHttp2Session) => {
    sessions.add(s);
    s.setLocalWindowSize(windows.connection);
    s.once("close", () => sessions.delete(s));
    if (closing) s.close();
  });
  const sockets = new Set<net.Socket>();

  const front = net.createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.setTimeout(config.headersTimeoutMs, () => socket.destroy()); // nothing sent at all
    let head: Buffer = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = head.byteLength === 0 ? chunk : Buffer.concat([head, chunk]);
      const n = Math.min(head.byteLength, H2_PREFACE.byteLength);
      const isH2 = head.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
      if (isH2 && n < 2) return; // "P" could still be "POST": wait for one more byte
      socket.off("data", onData);
      socket.setTimeout(0);
      socket.pause();
      socket.unshift(head);
      if (isH2) {
        h2.emit("connection", socket); // the session reads the unshifted bytes itself
      } else {
        h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  });
  front.on("error", (err) => logger.error({ err }, "server error"));

  let port = 0;
  let metricsPort: number | undefined;
  return {
    get port() {
      return port;
    },
    get metricsPort() {
      return metricsPort;
    },
    listen(p = config.port, host = config.host): Promise<number> {
      return new Promise<number>((resolve, reject) => {
        front.once("error", reject);
        front.listen(p, host, () => {
          front.off("error", reject);
          port = (front.address() as AddressInfo).port;
          resolve(port);
        });
      }).then(async (bound) => {
        if (metricsServer && config.metricsPort !== undefined) metricsPort = await metricsServer.listen(config.metricsPort, host);
        return bound;
      });
    },
    async shutdown(graceMs = config.shutdownGraceMs): Promise<void> {
      if (closing) return;
      closing = true;
      stopping.abort(); // health: NOT_SERVING, Watch streams get it and end
      const frontClosed = new Promise<void>((resolve) => front.close(() => resolve()));
      for (const s of sessions) s.close(); // GOAWAY: running streams finish, no new ones
      h1.closeIdleConnections();
      if (inFlight > 0) {
        await new Promise<void>((resolve) => {
          drained = resolve;
          setTimeout(resolve, graceMs).unref();
        });
      }
      shutdownController.abort(); // cancel whatever is left (its quota is refunded)
      for (const s of sessions) s.destroy();
      for (const socket of sockets) socket.destroy();
      h1.close(() => {});
      await frontClosed;
      await metricsServer?.close();
      await rest.close();
      logger.info({ abandoned: inFlight }, "server stopped");
    },
  };
}
