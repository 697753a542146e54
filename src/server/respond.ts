/**
 * Writing an answer whose request body may not have been read (a refusal at the door, a 413, a
 * REST error before the body ended), on HTTP/1.1 and HTTP/2 alike. An unread body is never
 * drained: HTTP/1.1 closes the connection after a bounded "lingering close", HTTP/2 resets the
 * stream with NO_ERROR after the answer (RFC 9113 8.1) and sends the connection a GOAWAY.
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

/** LINGER (HTTP/1.1): after refusing an unread body, keep discarding for at most 1 s or 1 MiB, then close. */
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
 * widenConnectionWindow lets a connection send `bytes` ahead once one of its requests has been
 * admitted (a recognised key): until then it has HTTP/2's default 64 KiB, so a connection that
 * never shows a key can make the server receive little more than that per refusal
 * (test/integration/door.spec.ts, "keyless 8 MiB bodies").
 */
export function widenConnectionWindow(req: NodeRequest, bytes: number): void {
  if (!("stream" in req)) return;
  const session = req.stream.session;
  if (!session || session.destroyed || session.closed || widened.has(session)) return;
  widened.add(session);
  session.setLocalWindowSize(bytes);
}
const widened = new WeakSet<http2.Http2Session>();

/**
 * endUnreadStream prepares the end of an HTTP/2 upload the server will not read, before its
 * answer goes out; the function it returns ends it once the answer is written. An upload that
 * has already arrived whole (its end is buffered, at most 64 KiB) is discarded. Otherwise a
 * GOAWAY goes out before the answer, so the client sends its next call on a new connection
 * instead of racing the close, and after the answer the stream is reset (NO_ERROR, RFC 9113 8.1)
 * and the connection closed once its other calls finish: nothing more of the upload is read.
 * Reading on and discarding would cost about 1 ms of the event loop per MiB, and a reset stream
 * whose DATA is still arriving stalls a Node connection that goes on (door.spec.ts, "keyless
 * 8 MiB bodies").
 */
function endUnreadStream(req: NodeRequest & { stream: http2.ServerHttp2Stream }): () => void {
  const stream = req.stream;
  const session = stream.session;
  if (uploadArrived(stream)) return () => void req.resume();
  const open = () => session !== undefined && !session.closed && !session.destroyed;
  if (open()) session?.goaway(http2.constants.NGHTTP2_NO_ERROR, Math.max(stream.id ?? 0, session.state.lastProcStreamID ?? 0));
  return () => {
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    if (open()) session?.close();
  };
}

/** uploadArrived: the stream's whole request body is already buffered (its end received), and it is small. */
function uploadArrived(stream: http2.ServerHttp2Stream): boolean {
  const state = (stream as unknown as { _readableState?: { ended?: boolean } })._readableState;
  return (stream.readableEnded || state?.ended === true) && stream.readableLength <= 64 * 1024;
}

/**
 * releaseUnreadBody prepares an answer written before the request body ended: HTTP/1.1 closes
 * the connection after it (lingering), HTTP/2 ends the stream after it ({@link endUnreadStream}).
 * Call it before the answer's head is written. Draining instead would read up to 8 MiB nobody needs.
 */
export function releaseUnreadBody(req: NodeRequest, res: NodeResponse): void {
  if (req.complete || res.headersSent) return;
  if ("stream" in req) {
    res.once("finish", endUnreadStream(req));
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
    const end = req.complete ? undefined : endUnreadStream(req);
    req.stream.respond({ ":status": answer.status, ...h }, { endStream: true });
    end?.();
    return;
  }
  h["content-length"] = String(answer.body.byteLength);
  releaseUnreadBody(req, res);
  res.writeHead(answer.status, h);
  res.end(answer.body);
}
