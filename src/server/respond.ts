/**
 * Writing an answer whose request body may not have been read (a refusal at the door, a 413, a
 * REST error before the body ended), on HTTP/1.1 and HTTP/2 alike. An unread body is never
 * drained: HTTP/1.1 closes the connection after a bounded "lingering close", HTTP/2 resets the
 * stream with NO_ERROR after the answer (RFC 9113 8.1), and where the connection has its full
 * windows also sends it a GOAWAY (endUnreadStream).
 */
import http2 from "node:http2";
import type { Answer } from "../wire/error-answer.js";
import { declaredLength, type NodeRequest, type NodeResponse } from "../wire/http.js";
import { LINGER_BYTES, lingerOnClose, streamBodyEnded } from "../wire/private-apis.js";

/** LINGER_MS: how long an HTTP/2 stream refused unread may take to fill its default window before its connection closes. */
const LINGER_MS = 1000;

/** HTTP/2's default window (RFC 9113 6.9.2): what a connection and each of its streams may send ahead until a call on it comes with a recognised key. */
export const H2_DEFAULT_WINDOW = 65_535;

/**
 * widenWindows gives a connection its full receive windows (`stream` bytes per call, `connection`
 * bytes for all) once one of its calls came with a recognised key: until then each
 * stream and the connection may send only HTTP/2's default 64 KiB ahead, so a connection that
 * never shows a key cannot make the server receive more than that per refused call
 * (test/integration/door.spec.ts, "keyless 8 MiB bodies").
 */
export function widenWindows(req: NodeRequest, windows: { stream: number; connection: number }): void {
  if (!("stream" in req)) return;
  const session = req.stream.session;
  if (!session || session.destroyed || session.closed || widened.has(session)) return;
  widened.add(session);
  session.settings({ initialWindowSize: windows.stream });
  session.setLocalWindowSize(windows.connection);
}
const widened = new WeakSet<http2.Http2Session>();

/**
 * endUnreadStream prepares the end of an HTTP/2 upload the server will not read, before its
 * answer goes out; the function it returns ends it once the answer is written.
 * - Its whole body already arrived (at most 64 KiB): discarded.
 * - On a connection where no call came with a recognised key, the stream may send only 64 KiB: that much
 *   is read and discarded (a few chunks), then the stream is reset (NO_ERROR, RFC 9113 8.1)
 *   with nothing of it still in flight, and the connection goes on.
 * - Otherwise (a connection with 8 MiB windows, or a client that stops sending): a GOAWAY goes
 *   out before the answer, so the client's next call opens a new connection instead of racing
 *   the close, and after the answer the stream is reset and the connection closed once its other
 *   calls finish. Node never credits the connection window for DATA that arrives on a reset
 *   stream, so a connection that went on after such a reset would stall; reading the rest
 *   instead would cost about 1 ms of the event loop per MiB (door.spec.ts, "keyless 8 MiB bodies").
 */
function endUnreadStream(req: NodeRequest & { stream: http2.ServerHttp2Stream }): () => void {
  const stream = req.stream;
  const session = stream.session;
  if (uploadArrived(stream)) return () => void req.resume();
  const open = () => session !== undefined && !session.closed && !session.destroyed;
  const closeConnection = () => {
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    if (open()) session?.close();
  };
  if (session && !widened.has(session)) return () => drainWindow(req, closeConnection);
  if (open()) session?.goaway(http2.constants.NGHTTP2_NO_ERROR, Math.max(stream.id ?? 0, session.state.lastProcStreamID ?? 0));
  return closeConnection;
}

/**
 * drainWindow discards what a stream with the default window can send, then resets it: once
 * 64 KiB arrived the client has no window left on it, so nothing is in flight. A body that ends
 * first needs no reset; a client that neither ends nor fills the window within 1 s gets
 * `otherwise` (GOAWAY and close).
 */
function drainWindow(req: NodeRequest & { stream: http2.ServerHttp2Stream }, otherwise: () => void): void {
  const stream = req.stream;
  let received = 0;
  const timer = setTimeout(otherwise, LINGER_MS);
  timer.unref();
  req.on("data", (chunk: Buffer) => {
    received += chunk.byteLength;
    if (received < H2_DEFAULT_WINDOW) return;
    clearTimeout(timer);
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
  });
  req.once("end", () => clearTimeout(timer));
  req.resume();
}

/** uploadArrived: the stream's whole request body is already buffered (its end received), and it is small. */
function uploadArrived(stream: http2.ServerHttp2Stream): boolean {
  return streamBodyEnded(stream) && stream.readableLength <= 64 * 1024;
}

/**
 * unreadBytes is how much of `req`'s body an answer written now may make this replica read and
 * discard: none once the body arrived, else what is declared left, up to the lingering close's
 * bound on HTTP/1.1 and the default window on HTTP/2 (src/server/refusal-pace.ts charges it).
 */
export function unreadBytes(req: NodeRequest): number {
  if (req.complete || ("stream" in req && uploadArrived(req.stream))) return 0;
  return Math.min(declaredLength(req) ?? Number.POSITIVE_INFINITY, "stream" in req ? H2_DEFAULT_WINDOW : LINGER_BYTES);
}

/**
 * releaseUnreadBody prepares an answer written before the request body ended: HTTP/1.1 closes
 * the connection after it (lingering, unless `linger` is false: then Node's own close, which
 * discards nothing), HTTP/2 ends the stream after it ({@link endUnreadStream}). Call it before
 * the answer's head is written. Draining instead would read up to 8 MiB nobody needs.
 */
export function releaseUnreadBody(req: NodeRequest, res: NodeResponse, linger = true): void {
  if (req.complete || res.headersSent) return;
  if ("stream" in req) {
    res.once("finish", endUnreadStream(req));
  } else {
    res.setHeader("connection", "close");
    if (linger) lingerOnClose(req.socket);
  }
}

/**
 * respond writes `answer` unless a response was already started or the client is gone. An
 * empty body on HTTP/2 is one HEADERS frame with END_STREAM: the trailers-only answer gRPC and
 * gRPC-Web clients read their status from (test/integration/door.spec.ts). `linger`: see
 * {@link releaseUnreadBody}.
 */
export function respond(req: NodeRequest, res: NodeResponse, answer: Answer, linger = true): void {
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
  releaseUnreadBody(req, res, linger);
  res.writeHead(answer.status, h);
  res.end(answer.body);
}
