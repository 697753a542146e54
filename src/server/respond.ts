/**
 * Writing an answer whose request body may not have been read (a refusal at the door, a 413, a
 * REST error before the body ended), on HTTP/1.1 and HTTP/2 alike. An unread body is never
 * drained: HTTP/1.1 closes the connection after a bounded "lingering close", HTTP/2 resets the
 * stream with NO_ERROR after the answer (RFC 9113 8.1).
 */
import http2 from "node:http2";
import type net from "node:net";
import type { NodeRequest, NodeResponse } from "../api/http.js";

/** Answer is a complete response: status, headers and the whole body. */
export interface Answer {
  readonly status: number;
  readonly headers: Headers;
  readonly body: Uint8Array;
}

/** LINGER: after refusing an unread body, keep discarding for at most 1 s or 1 MiB, then reset. */
const LINGER_MS = 1000;
const LINGER_BYTES = 1024 * 1024;

/**
 * lingerOnClose replaces the immediate close Node does after a `Connection: close` response by a
 * bounded "lingering close" (as nginx does): the client still uploading gets to read the response
 * instead of a connection reset that would discard it (test/integration/rest.spec.ts, 413 cases).
 */
function lingerOnClose(socket: net.Socket): void {
  socket.destroySoon = function lingeringDestroySoon(this: net.Socket) {
    this.end();
    let discarded = 0;
    const timer = setTimeout(() => this.destroy(), LINGER_MS);
    timer.unref();
    this.on("data", (chunk: Buffer) => {
      discarded += chunk.byteLength;
      if (discarded > LINGER_BYTES) this.destroy();
    });
    this.once("close", () => clearTimeout(timer));
  };
}

/**
 * lingerThenReset discards the rest of an HTTP/2 upload, for at most 1 s and 8 MiB, then resets
 * the stream with NO_ERROR. Not at once: an immediate RST_STREAM would make nghttp2 drop the
 * answer's queued DATA frames, and what the client had already sent on the reset stream would
 * never be credited back to the connection's flow-control window (its next calls would stall,
 * then be refused with ENHANCE_YOUR_CALM).
 */
function lingerThenReset(req: NodeRequest & { stream: http2.ServerHttp2Stream }): void {
  const stream = req.stream;
  let discarded = 0;
  const close = () => {
    clearTimeout(timer);
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  };
  const timer = setTimeout(close, LINGER_MS);
  timer.unref();
  req.on("data", (chunk: Buffer) => {
    discarded += chunk.byteLength;
    if (discarded > 8 * LINGER_BYTES) close();
  });
  req.once("end", close);
  req.resume();
}

/**
 * releaseUnreadBody prepares an answer written before the request body ended: HTTP/1.1 closes
 * the connection after it (lingering), HTTP/2 resets the stream with NO_ERROR after it. Call it
 * before the answer's head is written. Draining instead would read up to 8 MiB nobody needs.
 */
export function releaseUnreadBody(req: NodeRequest, res: NodeResponse): void {
  if (req.complete || res.headersSent) return;
  if ("stream" in req) {
    res.once("finish", () => lingerThenReset(req));
  } else {
    res.setHeader("connection", "close");
    lingerOnClose(req.socket);
  }
}

/**
 * respond writes `answer` unless a response was already started or the client is gone. An
 * empty body on HTTP/2 is one HEADERS frame with END_STREAM: the trailers-only answer gRPC and
 * gRPC-Web clients read their status from (test/integration/door.spec.ts).
 */
export function respond(req: NodeRequest, res: NodeResponse, answer: Answer): void {
  if (res.headersSent || res.destroyed) return;
  const h: Record<string, string> = {};
  answer.headers.forEach((v, k) => {
    h[k] = v;
  });
  if ("stream" in req && answer.body.byteLength === 0) {
    if (req.stream.destroyed || req.stream.headersSent) return;
    req.stream.respond({ ":status": answer.status, ...h }, { endStream: true });
    if (!req.complete) lingerThenReset(req);
    return;
  }
  h["content-length"] = String(answer.body.byteLength);
  releaseUnreadBody(req, res);
  res.writeHead(answer.status, h);
  res.end(answer.body);
}
