/**
 * The REST codec: request bodies to messages and response messages to JSON bytes. Small bodies
 * are handled inline; large ones (a 12 MP photo is a 4-5 MB JSON body, its answer a few MB of
 * base64) go to worker threads, so that their JSON and base64 work never blocks the event loop
 * that health checks and other requests need (docs/decisions/rest-codec-threads.md).
 *
 * Workers start on first use and are unref'd (they never keep the process alive). A job whose
 * worker dies (or fails for any reason but the input's) is redone inline, so a client never
 * pays for a codec fault with a 500 after its analysis was charged; the next job starts a
 * fresh worker.
 *
 * Fair: each worker takes one job at a time, and waiting jobs are handed out client by client in
 * turn (round robin), so one client's large bodies, rejected or not, never make another client's
 * wait behind all of them (issue 29, finding 2; test/unit/rest/rest-codec.spec.ts, "in turn").
 * A job whose request has gone away while it waited is dropped.
 */
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import type { Worker } from "node:worker_threads";
import { nextInTurn } from "../workers/fair-turn.js";
import { siblingModuleUrl, spawnWorker } from "../workers/worker-thread.js";
import { codecError, type CodecReply, type CodecRequest } from "./rest-codec-protocol.js";
import { decodeRestBody, encodeRestBody } from "./rest-json.js";

/** RestCodecOptions configure {@link createRestCodec}. */
export interface RestCodecOptions {
  /** Worker threads; 0 does everything inline. */
  threads: number;
  /** Request bodies from this size on are decoded in a worker, and answers whose base64 would be. Default 64 KiB. */
  offloadMinBytes?: number;
  /** Starts a worker (tests keep a handle on it); default {@link spawnWorker}. */
  spawn?: typeof spawnWorker;
}

/** RestCodec decodes REST requests and encodes REST responses. */
export interface RestCodec {
  /**
   * decode parses a JSON body into `desc` (route body field `bodyField`); rejects with our
   * ConnectErrors, or with `job.signal`'s reason when it aborts while the job waits.
   */
  decode<Desc extends DescMessage>(desc: Desc, bodyField: string, bytes: Uint8Array, job?: CodecJob): Promise<MessageShape<Desc>>;
  /** encode writes `msg` as SPEC.md JSON bytes. Messages with bytes fields are encoded in a worker. */
  encode<Desc extends DescMessage>(desc: Desc, msg: MessageShape<Desc>, job?: CodecJob): Promise<Uint8Array>;
  /** close terminates the workers; pending jobs reject. */
  close(): Promise<void>;
}

/** CodecJob says whose a job is, for the fair order, and when nobody waits for it any more. */
export interface CodecJob {
  /** The client it is done for ("" when unnamed). */
  client?: string;
  signal?: AbortSignal;
}

/** Gone carries the reason of a request that went away while its job waited. */
class Gone {
  constructor(readonly reason: unknown) {}
}

/** Waiting is a job not yet handed to a worker. */
interface Waiting {
  client: string;
  req: CodecRequest;
  transfer: ArrayBuffer[];
  signal?: AbortSignal;
  onAbort?: () => void;
  resolve: (r: CodecReply) => void;
  reject: (e: unknown) => void;
}

interface Slot {
  worker: Worker;
  /** The one job it runs, if any. */
  job: Waiting | undefined;
}

/**
 * bytesIn counts the bytes of `msg`'s bytes fields (nested messages, lists and maps included),
 * stopping once `enough` is reached.
 */
export function bytesIn(desc: DescMessage, msg: object, enough = Number.POSITIVE_INFINITY): number {
  let n = 0;
  const rec = msg as Record<string, unknown>;
  const ofValue = (v: unknown, sub: DescMessage | undefined) =>
    v instanceof Uint8Array ? v.byteLength : sub && v && typeof v === "object" ? bytesIn(sub, v, enough - n) : 0;
  for (const f of desc.fields) {
    if (n >= enough) break;
    const oneof = f.oneof && (rec[f.oneof.localName] as { case?: string; value?: unknown } | undefined);
    const v = f.oneof ? (oneof?.case === f.localName ? oneof.value : undefined) : rec[f.localName];
    if (v === undefined || v === null) continue;
    const sub =
      f.fieldKind === "message" ? f.message : (f.fieldKind === "list" || f.fieldKind === "map") && f.message ? f.message : undefined;
    if (f.fieldKind === "list") for (const e of v as unknown[]) n += ofValue(e, sub);
    else if (f.fieldKind === "map") for (const e of Object.values(v as object)) n += ofValue(e, sub);
    else n += ofValue(v, sub);
  }
  return n;
}

/** createRestCodec returns a codec with up to `threads` lazily started workers. */
export function createRestCodec(options: RestCodecOptions): RestCodec {
  const threads = Math.max(0, Math.floor(options.threads));
  const offloadMinBytes = options.offloadMinBytes ?? 64 * 1024;
  const slots: (Slot | undefined)[] = Array.from({ length: threads }, () => undefined);
  const hasBytes = new Map<string, boolean>();
  const waiting: Waiting[] = [];
  /** The client served last (round robin). */
  let lastClient = "";
  let nextId = 1;
  let closed = false;

  function start(i: number): Slot {
    const worker = (options.spawn ?? spawnWorker)(siblingModuleUrl(import.meta.url, "rest-codec-worker"), undefined);
    worker.unref();
    const slot: Slot = { worker, job: undefined };
    worker.on("message", (reply: CodecReply) => {
      const job = slot.job;
      if (job?.req.id !== reply.id) return;
      slot.job = undefined;
      job.resolve(reply);
      pump();
    });
    const onDeath = (cause: unknown) => {
      if (slots[i] === slot) slots[i] = undefined;
      const job = slot.job;
      slot.job = undefined;
      job?.reject(new Error("The REST codec worker stopped unexpectedly.", { cause }));
      pump();
    };
    worker.on("error", onDeath);
    worker.on("exit", (code) => onDeath(new Error(`worker exited with code ${code}`)));
    slots[i] = slot;
    return slot;
  }

  /** pump hands waiting jobs to idle workers (started if need be), in the fair order. */
  function pump(): void {
    if (closed) return;
    for (let i = 0; i < slots.length && waiting.length > 0; i++) {
      let slot = slots[i];
      if (slot?.job) continue;
      const job = waiting.splice(nextInTurn(waiting, lastClient), 1)[0];
      lastClient = job.client;
      if (job.signal && job.onAbort) job.signal.removeEventListener("abort", job.onAbort);
      slot ??= start(i);
      slot.job = job;
      slot.worker.postMessage(job.req, job.transfer);
    }
  }

  /** Runs `req` in a worker; undefined when the worker failed (not the input): redo it inline. */
  async function call(req: CodecRequest, transfer: ArrayBuffer[], job: CodecJob = {}): Promise<CodecReply | undefined> {
    if (closed) throw new Error("The REST codec is closed.");
    const { signal } = job;
    if (signal?.aborted) throw signal.reason;
    const reply = await new Promise<CodecReply>((resolve, reject) => {
      const w: Waiting = { client: job.client ?? "", req, transfer, signal, resolve, reject };
      if (signal) {
        w.onAbort = () => {
          const i = waiting.indexOf(w);
          if (i >= 0) waiting.splice(i, 1);
          reject(new Gone(signal.reason));
        };
        signal.addEventListener("abort", w.onAbort, { once: true });
      }
      waiting.push(w);
      pump();
    }).catch((e: unknown) => {
      // Gone while it waited: the request's own reason; a worker fault: redone inline.
      if (e instanceof Gone) throw e.reason;
      return undefined;
    });
    if (reply && !reply.ok) {
      if (reply.failure.reason === undefined) return undefined;
      throw codecError(reply.failure);
    }
    return reply;
  }

  function withBytesFields(desc: DescMessage): boolean {
    let v = hasBytes.get(desc.typeName);
    if (v === undefined) {
      hasBytes.set(desc.typeName, false); // recursion guard
      v = desc.fields.some(
        (f) =>
          (f.fieldKind === "scalar" && f.scalar === ScalarType.BYTES) ||
          (f.fieldKind === "message" && !f.message.typeName.startsWith("google.protobuf.") && withBytesFields(f.message)),
      );
      hasBytes.set(desc.typeName, v);
    }
    return v;
  }

  return {
    async decode(desc, bodyField, bytes, job) {
      if (threads === 0 || bytes.byteLength < offloadMinBytes) return decodeRestBody(desc, bodyField, bytes);
      // A private copy, transferred: the caller's buffer may be a slice of a shared pool.
      const copy = new Uint8Array(bytes);
      const reply = await call({ type: "decode", id: nextId++, typeName: desc.typeName, bodyField, bytes: copy }, [copy.buffer], job);
      if (!reply) return decodeRestBody(desc, bodyField, bytes);
      return (reply as { message: unknown }).message as MessageShape<typeof desc>;
    },
    async encode(desc, msg, job) {
      // Small answers (base64 of under offloadMinBytes) inline, as small bodies are decoded: they
      // never wait behind another client's large job (rest-codec.spec, "small answers inline").
      if (threads === 0 || !withBytesFields(desc) || bytesIn(desc, msg, (offloadMinBytes * 3) / 4) < (offloadMinBytes * 3) / 4)
        return encodeRestBody(desc, msg);
      const reply = await call({ type: "encode", id: nextId++, typeName: desc.typeName, message: msg }, [], job);
      if (!reply) return encodeRestBody(desc, msg);
      return (reply as { bytes: Uint8Array }).bytes;
    },
    async close() {
      closed = true;
      for (const w of waiting.splice(0)) w.reject(new Error("The REST codec is closed."));
      await Promise.all(slots.map((s) => s?.worker.terminate()));
    },
  };
}
