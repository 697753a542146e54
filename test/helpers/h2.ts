/** A plain Node HTTP/2 client session, as tests and the bench open it. */
import http2 from "node:http2";

/**
 * openH2Session connects to `url` and resolves once the connection is up. Errors after that are
 * left to each stream (a call's own error says enough). As grpc-js does, the session memory
 * limit is lifted: the unsent writes of streams the server reset count against a Node client's
 * session memory (10 MB by default), which would refuse this client's own later answers.
 */
export function openH2Session(url: string): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, { maxSessionMemory: Number.MAX_SAFE_INTEGER });
    session.once("connect", () => {
      session.off("error", reject);
      session.on("error", () => {});
      resolve(session);
    });
    session.once("error", reject);
  });
}
