/**
 * Keyless RPC bodies (issue 20): requests that carry a full 8 MiB message but no API key, which
 * the server must refuse (unauthenticated) without letting them cost it more than a moment.
 * Sent with Node's own http2 client, the message encoded once, so the load generator spends as
 * little as it can: gRPC (length-prefixed, application/grpc) and Connect unary (application/proto).
 */
import http2 from "node:http2";
import { create, toBinary } from "@bufbuild/protobuf";
import { AnalyzeRequestSchema, PalmService } from "../gen/palm/v1/palm_pb.js";
import { MAX_BODY_BYTES } from "../src/limits.js";
import { openH2Session, processRunNs, runNs, type ServerProcess } from "../test/helpers/index.js";
import { median, quantile } from "./stats.js";

export type RpcProtocol = "gRPC" | "Connect";

const PATH = `/${PalmService.typeName}/${PalmService.method.analyze.name}`;

/** keylessMessage is an AnalyzeRequest whose encoding is exactly MAX_BODY_BYTES (8 MiB): the largest the server accepts. */
function keylessMessage(): Buffer {
  const overhead =
    toBinary(AnalyzeRequestSchema, create(AnalyzeRequestSchema, { image: new Uint8Array(MAX_BODY_BYTES - 16) })).byteLength -
    (MAX_BODY_BYTES - 16);
  const image = new Uint8Array(MAX_BODY_BYTES - overhead);
  for (let i = 0; i < image.length; i += 4096) image[i] = (i * 2654435761) >>> 24; // not all zeros
  const bytes = Buffer.from(toBinary(AnalyzeRequestSchema, create(AnalyzeRequestSchema, { image })));
  if (bytes.byteLength !== MAX_BODY_BYTES) throw new Error(`keyless message is ${bytes.byteLength} bytes, not ${MAX_BODY_BYTES}`);
  return bytes;
}

let cached: { gRPC: Buffer; Connect: Buffer } | undefined;
/** bodies are the two protocols' request bodies carrying the 8 MiB message. */
function bodies(): { gRPC: Buffer; Connect: Buffer } {
  if (!cached) {
    const msg = keylessMessage();
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(msg.byteLength, 1);
    cached = { gRPC: Buffer.concat([prefix, msg]), Connect: msg };
  }
  return cached;
}

/** KeylessAnswer is what one keyless call saw. */
export interface KeylessAnswer {
  /** ms from sending the request to the answer's headers. */
  firstByte: number;
  /** ms from sending the request to the stream's end. */
  total: number;
  /** "grpc-status 16", "HTTP 401", "reset", ... */
  outcome: string;
}

/** keylessCall sends one keyless 8 MiB body over `session` and waits for its answer and the stream's end. */
export function keylessCall(session: http2.ClientHttp2Session, protocol: RpcProtocol): Promise<KeylessAnswer> {
  const headers: http2.OutgoingHttpHeaders =
    protocol === "gRPC"
      ? { ":method": "POST", ":path": PATH, "content-type": "application/grpc+proto", te: "trailers" }
      : { ":method": "POST", ":path": PATH, "content-type": "application/proto", "connect-protocol-version": "1" };
  return new Promise((resolve) => {
    const t0 = performance.now();
    let firstByte = Number.NaN;
    let outcome = "no answer";
    let req: http2.ClientHttp2Stream;
    try {
      req = session.request(headers);
    } catch {
      return resolve({ firstByte, total: performance.now() - t0, outcome: "connection gone" });
    }
    req.on("response", (h) => {
      firstByte = performance.now() - t0;
      const status = h["grpc-status"];
      outcome = protocol === "gRPC" && status !== undefined ? `grpc-status ${status}` : `HTTP ${h[":status"]}`;
    });
    req.on("trailers", (t) => {
      if (t["grpc-status"] !== undefined) outcome = `grpc-status ${t["grpc-status"]}`;
    });
    req.on("error", () => {
      if (Number.isNaN(firstByte)) outcome = "reset";
    });
    // A call the server never ends must not stall the whole bench: after 10 s it counts as such.
    const stall = setTimeout(() => {
      outcome = "no end within 10 s";
      req.close(http2.constants.NGHTTP2_CANCEL);
    }, 10_000);
    req.on("close", () => {
      clearTimeout(stall);
      resolve({ firstByte, total: performance.now() - t0, outcome });
    });
    req.resume();
    req.end(bodies()[protocol]);
  });
}

/** ServerCost is what keyless calls cost the server, measured from its side, and what the client saw. */
export interface ServerCost {
  calls: number;
  /** The event loop's (main thread's) CPU time per call, ms, less its idle rate. */
  eventLoopMs: number;
  /** All the server process's threads together, per call, ms, less their idle rate. */
  processMs: number;
  /** Client-side: ms to the answer's headers, p50 and p99, on the warm connection. */
  firstByteP50: number;
  firstByteP99: number;
  outcomes: Record<string, number>;
  /** HTTP/2 connections the calls took (the server closes a connection that never showed a key after refusing an upload on it). */
  connections: number;
}

/**
 * keylessCost sends `calls` keyless 8 MiB bodies one after another, each on the client's
 * HTTP/2 connection, opening a new one where the server closed it (as gRPC and Connect clients
 * do), after 3 untimed ones, and reads the server's CPU time before and after from
 * /proc/<pid>/task/<tid>/schedstat (nanoseconds): the event loop's thread alone, and the whole
 * process. The rate both use while idle, measured for one second just before, is subtracted.
 */
export async function keylessCost(server: ServerProcess, protocol: RpcProtocol, calls: number): Promise<ServerCost> {
  let session = await openH2Session(server.url);
  let connections = 0;
  const call = async () => {
    if (session.closed || session.destroyed) {
      session = await openH2Session(server.url);
      connections++;
    }
    return keylessCall(session, protocol);
  };
  try {
    for (let i = 0; i < 3; i++) await call();
    connections = 1;
    const idle0 = { loop: runNs(server.pid), all: processRunNs(server.pid), t: performance.now() };
    await new Promise((r) => setTimeout(r, 1000));
    const idleS = (performance.now() - idle0.t) / 1000;
    const idleRate = { loop: (runNs(server.pid) - idle0.loop) / idleS, all: (processRunNs(server.pid) - idle0.all) / idleS };

    const answers: KeylessAnswer[] = [];
    const t0 = performance.now();
    const loop0 = runNs(server.pid);
    const all0 = processRunNs(server.pid);
    for (let i = 0; i < calls; i++) answers.push(await call());
    const loop = runNs(server.pid) - loop0;
    const all = processRunNs(server.pid) - all0;
    const wallS = (performance.now() - t0) / 1000;
    const outcomes: Record<string, number> = {};
    for (const a of answers) outcomes[a.outcome] = (outcomes[a.outcome] ?? 0) + 1;
    const fb = answers.map((a) => a.firstByte).filter(Number.isFinite);
    return {
      calls,
      eventLoopMs: (loop - idleRate.loop * wallS) / 1e6 / calls,
      processMs: (all - idleRate.all * wallS) / 1e6 / calls,
      firstByteP50: median(fb),
      firstByteP99: quantile(fb, 0.99),
      outcomes,
      connections,
    };
  } finally {
    session.close();
  }
}

/**
 * keylessFlood keeps `clients` clients (each on its own HTTP/2 connection; alternately gRPC and
 * Connect) sending keyless 8 MiB bodies back to back until `stop` resolves. Returns the calls
 * answered and their outcomes.
 */
export async function keylessFlood(
  server: ServerProcess,
  clients: number,
  stop: Promise<unknown>,
): Promise<{ calls: number; outcomes: Record<string, number> }> {
  let done = false;
  void stop.then(() => (done = true));
  const outcomes: Record<string, number> = {};
  let calls = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      const protocol: RpcProtocol = i % 2 === 0 ? "gRPC" : "Connect";
      let session = await openH2Session(server.url);
      try {
        while (!done) {
          if (session.closed || session.destroyed) session = await openH2Session(server.url);
          const a = await keylessCall(session, protocol);
          calls++;
          const k = `${protocol} ${a.outcome}`;
          outcomes[k] = (outcomes[k] ?? 0) + 1;
        }
      } finally {
        session.close();
      }
    }),
  );
  return { calls, outcomes };
}
