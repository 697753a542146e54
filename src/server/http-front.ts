/**
 * The HTTP front: ONE port for HTTP/2 cleartext and HTTP/1.1. Node 20's plaintext
 * `http2.createServer` does not fall back to HTTP/1.1 (its `allowHTTP1` is honoured with TLS
 * only), so a TCP server reads the first bytes of each connection and hands it to an HTTP/2 server
 * (client preface "PRI * HTTP/2.0") or an HTTP/1.1 server; both run the same handler. The front
 * also owns the slow-client bounds, the count of requests in flight and the two steps of a
 * shutdown: drain (stop accepting, let requests finish) and close (cut what is left);
 * test/integration/shutdown.spec.ts and protocols.spec.ts pin them.
 */
import http from "node:http";
import http2 from "node:http2";
import type { ServerHttp2Session } from "node:http2";
import net, { type AddressInfo } from "node:net";
import { errorAnswer } from "../wire/error-answer.js";
import { pathOf, type NodeHandlerFn } from "../wire/http.js";
import type { Config } from "../config.js";
import type { Logger } from "../log.js";
import type { AccessLog } from "./access-log.js";
import { H2_DEFAULT_WINDOW } from "./respond.js";

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/** HttpFrontOptions configure {@link HttpFront}. */
export interface HttpFrontOptions {
  config: Pick<Config, "headersTimeoutMs" | "bodyTimeoutMs" | "idleTimeoutMs">;
  logger: Logger;
  /** Writes the HTTP/1.1 connections whose request headers never came. */
  accessLog: Pick<AccessLog, "headersTimedOut">;
  /** Serves every request, on either protocol. */
  handler: NodeHandlerFn;
  /** Paths whose "Expect: 100-continue" the handler answers itself (the API's, after the key check). */
  answersContinue: (path: string) => boolean;
}

/** HttpFront serves one port with HTTP/2 and HTTP/1.1 and drains it on shutdown. */
export class HttpFront {
  readonly #h1: http.Server;
  readonly #h2: http2.Http2Server;
  readonly #tcp: net.Server;
  readonly #sessions = new Set<ServerHttp2Session>();
  readonly #sockets = new Set<net.Socket>();
  #inFlight = 0;
  #drained: (() => void) | undefined;
  #closing = false;
  #closed: Promise<void> | undefined;

  constructor(options: HttpFrontOptions) {
    const { config } = options;
    // Slow-client guard for every protocol: the whole request must arrive within this bound.
    const receiveTimeoutMs = config.headersTimeoutMs + config.bodyTimeoutMs + 1000;
    const handle: NodeHandlerFn = (req, res) => this.#track(req, res, receiveTimeoutMs, options.handler);
    this.#h1 = http.createServer(
      {
        headersTimeout: config.headersTimeoutMs,
        requestTimeout: receiveTimeoutMs,
        keepAliveTimeout: 5000,
        connectionsCheckingInterval: 1000,
      },
      handle,
    );
    this.#h1.on("clientError", (err: NodeJS.ErrnoException, socket: net.Socket) => answerClientError(err, socket, options.accessLog));
    // h1 never listens itself (the TCP front does); 'listening' starts its timeout checks.
    this.#h1.emit("listening");
    // Each stream's window is HTTP/2's default until a call on its connection comes with a recognised key (respond.ts, widenWindows).
    this.#h2 = http2.createServer({ settings: { maxConcurrentStreams: 256, initialWindowSize: H2_DEFAULT_WINDOW } }, handle);
    // "Expect: 100-continue": paths that answer it themselves get it after the key check;
    // everything else gets the 100 at once, as Node would do by itself.
    const checkContinue: NodeHandlerFn = (req, res) => {
      if (!options.answersContinue(pathOf(req))) res.writeContinue();
      handle(req, res);
    };
    this.#h1.on("checkContinue", checkContinue);
    this.#h2.on("checkContinue", checkContinue);
    this.#h2.setTimeout(config.idleTimeoutMs);
    this.#h2.on("session", (s: ServerHttp2Session) => {
      this.#sessions.add(s);
      s.once("close", () => this.#sessions.delete(s));
      if (this.#closing) s.close();
    });
    this.#tcp = net.createServer((socket) => this.#sniff(socket, config.headersTimeoutMs));
    this.#tcp.on("error", (err) => options.logger.error({ err }, "server error"));
  }

  /** The requests whose responses have not closed yet. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** listen binds the port; resolves with the bound port. */
  listen(port: number, host?: string): Promise<number> {
    return new Promise<number>((resolve, reject) => {
      this.#tcp.once("error", reject);
      this.#tcp.listen(port, host, () => {
        this.#tcp.off("error", reject);
        resolve((this.#tcp.address() as AddressInfo).port);
      });
    });
  }

  /**
   * drain stops accepting (the port closes, HTTP/2 sessions get GOAWAY, idle HTTP/1.1 connections
   * close, the others get `connection: close`) and resolves once no request is in flight or after
   * `graceMs`, whichever comes first.
   */
  async drain(graceMs: number): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    this.#closed = new Promise<void>((resolve) => this.#tcp.close(() => resolve()));
    for (const s of this.#sessions) s.close();
    this.#h1.closeIdleConnections();
    if (this.#inFlight === 0) return;
    await new Promise<void>((resolve) => {
      this.#drained = resolve;
      setTimeout(resolve, graceMs).unref();
    });
  }

  /** close cuts every session and connection still open and resolves when the port is closed. */
  async close(): Promise<void> {
    if (!this.#closing) await this.drain(0);
    for (const s of this.#sessions) s.destroy();
    for (const socket of this.#sockets) socket.destroy();
    this.#h1.close(() => {});
    await this.#closed;
  }

  #track(req: Parameters<NodeHandlerFn>[0], res: Parameters<NodeHandlerFn>[1], receiveTimeoutMs: number, handler: NodeHandlerFn): void {
    this.#inFlight++;
    const timer = setTimeout(() => {
      if (req.complete) return;
      if ("stream" in req) req.stream.close(http2.constants.NGHTTP2_CANCEL);
      else req.socket.destroy();
    }, receiveTimeoutMs);
    timer.unref();
    req.once("end", () => clearTimeout(timer));
    res.once("close", () => {
      clearTimeout(timer);
      this.#inFlight--;
      if (this.#closing) this.#h1.closeIdleConnections();
      if (this.#inFlight === 0) this.#drained?.();
    });
    if (this.#closing && req.httpVersionMajor === 1) res.setHeader("connection", "close");
    handler(req, res);
  }

  /** #sniff hands a new connection to HTTP/2 or HTTP/1.1 by its first bytes. */
  #sniff(socket: net.Socket, headersTimeoutMs: number): void {
    this.#sockets.add(socket);
    socket.once("close", () => this.#sockets.delete(socket));
    socket.setTimeout(headersTimeoutMs, () => socket.destroy()); // nothing sent at all
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
        this.#h2.emit("connection", socket); // the session reads the unshifted bytes itself
      } else {
        this.#h1.emit("connection", socket);
        socket.resume();
      }
    };
    socket.on("data", onData);
    socket.on("error", () => socket.destroy());
  }
}

/**
 * answerClientError answers HTTP/1.1 that never became a request. Headers not received in time
 * (PALM_HEADERS_TIMEOUT_MS): SPEC.md's 504 `timeout` in our JSON instead of Node's bare 408;
 * other malformed HTTP keeps Node's answers.
 */
function answerClientError(err: NodeJS.ErrnoException, socket: net.Socket, accessLog: HttpFrontOptions["accessLog"]): void {
  if (err.code === "ECONNRESET" || !socket.writable) return void socket.destroy();
  if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") {
    const answer = errorAnswer("rest", accessLog.headersTimedOut(), "");
    let head = `HTTP/1.1 ${answer.status} ${http.STATUS_CODES[answer.status]}\r\n`;
    answer.headers.forEach((v, k) => {
      head += `${k}: ${v}\r\n`;
    });
    socket.write(`${head}content-length: ${answer.body.byteLength}\r\nconnection: close\r\n\r\n`);
    socket.end(answer.body);
    return;
  }
  const tooLarge = err.code === "HPE_HEADER_OVERFLOW";
  socket.end(
    tooLarge
      ? "HTTP/1.1 431 Request Header Fields Too Large\r\nconnection: close\r\n\r\n"
      : "HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n",
  );
}
