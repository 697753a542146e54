/**
 * Everything the server takes from below a library's public API, in one file, each with its
 * reason. connect exports its protocol modules (`@connectrpc/connect/protocol*`) outside semantic
 * versioning, so package.json pins connect's exact version while this file imports them; Node's
 * stream internals are read or patched where Node offers no public way.
 */
import type net from "node:net";
import type http2 from "node:http2";

// Writing and reading each RPC protocol's error exactly as connect's clients parse it (trailers,
// trailer frames, end-stream messages, Connect's JSON error): the public API has no encoder, and a
// second one of our own could drift from connect's (src/wire/error-answer.ts).
export { codeToHttpStatus, endStreamFlag, endStreamFromJson, endStreamToJson } from "@connectrpc/connect/protocol-connect";
export { errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
export { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
export { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
// The door routes by connect's own handlers (their paths, methods, content types) and the RPC
// adapter runs them on a request it bounds first; connect-node's public adapter takes neither a
// decided route nor a guarded body (src/server/rpc-adapter.ts).
export { encodeEnvelope } from "@connectrpc/connect/protocol";
export type { Compression, UniversalHandler, UniversalServerResponse } from "@connectrpc/connect/protocol";
// REST calls the same service implementation through the same interceptors as the RPCs, without
// serialising its messages twice (src/rest/rest-handler.ts).
export { invokeUnaryImplementation } from "@connectrpc/connect/protocol";

/**
 * streamBodyEnded: the end of an HTTP/2 stream's request body was received, even if it is still
 * buffered unread. `readableEnded` turns true only once the buffer is read; the received end is
 * only in `_readableState.ended` (src/server/respond.ts, small uploads refused unread).
 */
export function streamBodyEnded(stream: http2.ServerHttp2Stream): boolean {
  const state = (stream as unknown as { _readableState?: { ended?: boolean } })._readableState;
  return stream.readableEnded || state?.ended === true;
}

/** LINGER (HTTP/1.1): after refusing an unread body, keep discarding for at most 1 s or 1 MiB, then close. */
const LINGER_MS = 1000;
export const LINGER_BYTES = 1024 * 1024;

/**
 * lingerOnClose replaces the immediate close Node's HTTP/1.1 server does after a
 * `Connection: close` response (its undocumented `socket.destroySoon`, which it calls then) by a
 * bounded "lingering close", as nginx does: the client still uploading gets to read the answer
 * instead of a connection reset that would discard it (test/integration/rest.spec.ts, 413 cases).
 */
export function lingerOnClose(socket: net.Socket): void {
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
