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
 */
import type { DescMessage, MessageShape } from "@bufbuild/protobuf";
import { ScalarType } from "@bufbuild/protobuf";
import type { Worker } from "node:worker_threads";
import { siblingModuleUrl, spawnWorker } from "../workers/worker-thread.js";
import { codecError, type CodecReply, type CodecRequest } from "./rest-codec-protocol.js";
import { decodeRestBody, encodeRestBody } from "./rest-json.js";

/** RestCodecOptions configure {@link createRestCodec}. */
export interface RestCodecOptions {
  /** Worker threads; 0 does everything inline. */
  threads: number;
  /** Request bodies from this size on are decoded in a worker, and responses with this many bytes of bytes fields encoded there. Default 64 KiB. */
  offloadMinBytes?: number;
  /** Starts a worker (tests keep a handle on it); default {@link spawnWorker}. */
  spawn?: typeof spawnWorker;
}

/** RestCodec decodes REST requests and encodes REST responses. */
export interface RestCodec {
  /** decode parses a JSON body into `desc` (route body field `bodyField`); rejects with our ConnectErrors. */
  decode<Desc extends DescMessage>(desc: Desc, bodyField: string, bytes: Uint8Array): Promise<MessageShape<Desc>>;
  /** encode writes `msg` as SPEC.md JSON bytes. Messages carrying `offloadMinBytes` or more in bytes fields are encoded in a worker. */
  encode<Desc extends DescMessage>(desc: Desc, msg: MessageShape<Desc>): Promise<Uint8Array>;
  /** close terminates the workers; pending jobs reject. */
  close(): Promise<void>;
}

interface Slot {
  worker: Worker;
  pending: Map<number, { resolve: (r: CodecReply) => void; reject: (e: unknown) => void }>;
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
  let nextId = 1;
  let closed = false;

  function start(i: number): Slot {
    const worker = (options.spawn ?? spawnWorker)(siblingModuleUrl(import.meta.url, "rest-codec-worker"), undefined);
    worker.unref();
    const slot: Slot = { worker, pending: new Map() };
    worker.on("message", (reply: CodecReply) => {
      const job = slot.pending.get(reply.id);
      slot.pending.delete(reply.id);
      job?.resolve(reply);
    });
    const onDeath = (cause: unknown) => {
      if (slots[i] === slot) slots[i] = undefined;
      for (const job of slot.pending.values()) job.reject(new Error("The REST codec worker stopped unexpectedly.", { cause }));
      slot.pending.clear();
    };
    worker.on("error", onDeath);
    worker.on("exit", (code) => onDeath(new Error(`worker exited with code ${code}`)));
    slots[i] = slot;
    return slot;
  }

  /** The least busy worker, started if need be. */
  function pick(): Slot {
    let best = -1;
    for (let i = 0; i < slots.length; i++) {
      const s = slots[i];
      if (!s) return start(i);
      if (best < 0 || s.pending.size < slots[best]!.pending.size) best = i;
    }
    return slots[best]!;
  }

  /** Runs `req` in a worker; undefined when the worker failed (not the input): redo it inline. */
  async function call(req: CodecRequest, transfer: ArrayBuffer[]): Promise<CodecReply | undefined> {
    if (closed) throw new Error("The REST codec is closed.");
    const slot = pick();
    const reply = await new Promise<CodecReply>((resolve, reject) => {
      slot.pending.set(req.id, { resolve, reject });
      slot.worker.postMessage(req, transfer);
    }).catch(() => undefined);
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
    async decode(desc, bodyField, bytes) {
      if (threads === 0 || bytes.byteLength < offloadMinBytes) return decodeRestBody(desc, bodyField, bytes);
      // A private copy, transferred: the caller's buffer may be a slice of a shared pool.
      const copy = new Uint8Array(bytes);
      const reply = await call({ type: "decode", id: nextId++, typeName: desc.typeName, bodyField, bytes: copy }, [copy.buffer]);
      if (!reply) return decodeRestBody(desc, bodyField, bytes);
      return (reply as { message: unknown }).message as MessageShape<typeof desc>;
    },
    async encode(desc, msg) {
      // An answer without images (a few KB of JSON) is cheaper written here than handed to a thread
      // (rest-codec.spec.ts, "encodes an answer without images inline").
      if (threads === 0 || !withBytesFields(desc) || bytesIn(desc, msg, offloadMinBytes) < offloadMinBytes) {
        return encodeRestBody(desc, msg);
      }
      const reply = await call({ type: "encode", id: nextId++, typeName: desc.typeName, message: msg }, []);
      if (!reply) return encodeRestBody(desc, msg);
      return (reply as { bytes: Uint8Array }).bytes;
    },
    async close() {
      closed = true;
      await Promise.all(slots.map((s) => s?.worker.terminate()));
    },
  };
}
