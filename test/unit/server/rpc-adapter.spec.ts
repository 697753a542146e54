import { describe, expect, it } from "vitest";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressionGzip } from "@connectrpc/connect-node";
import { isEnveloped, wireProtocolOf } from "../../../src/wire/http.js";
import { limitedCompression, limitRequestBody } from "../../../src/server/rpc-adapter.js";

class TooLarge extends Error {}

/** An enveloped message: flags 0, big-endian length, payload of `length` bytes. */
function envelope(length: number): Uint8Array {
  const out = new Uint8Array(5 + length);
  new DataView(out.buffer).setUint32(1, length, false);
  out.fill(7, 5);
  return out;
}

/** Splits bytes into chunks of the given sizes (the last takes the rest). */
function* chunked(bytes: Uint8Array, sizes: number[]): Generator<Uint8Array> {
  let pos = 0;
  for (const size of sizes) {
    yield bytes.subarray(pos, pos + size);
    pos += size;
  }
  if (pos < bytes.length) yield bytes.subarray(pos);
}

async function* source(chunks: Iterable<Uint8Array>, read: { n: number }): AsyncIterable<Uint8Array> {
  for (const c of chunks) {
    read.n++;
    yield c;
  }
}

async function drain(it: AsyncIterable<Uint8Array>): Promise<number> {
  let n = 0;
  for await (const c of it) n += c.byteLength;
  return n;
}

const concat = (...parts: Uint8Array[]) => Uint8Array.from(parts.flatMap((p) => [...p]));

describe("limitRequestBody()", () => {
  it("passes enveloped messages up to the limit through unchanged, however the chunks split their headers", async () => {
    const body = concat(envelope(100), envelope(0), envelope(64));
    for (const sizes of [[body.length], [1, 1, 1, 1, 1], [3, 4, 100, 2], [104, 1, 5, 3]]) {
      const read = { n: 0 };
      const n = await drain(limitRequestBody(source(chunked(body, sizes), read), true, 100, () => new TooLarge()));
      expect(n, String(sizes)).toBe(body.length);
    }
  });

  it("refuses an enveloped message declared over the limit as soon as its header is in, without reading on", async () => {
    const body = concat(envelope(10), envelope(101));
    const read = { n: 0 };
    // chunks: first message, the big one's 5-byte header, then its payload in 10 chunks
    const sizes = [15, 5, ...Array(10).fill(10)];
    await expect(drain(limitRequestBody(source(chunked(body, sizes), read), true, 100, () => new TooLarge()))).rejects.toBeInstanceOf(
      TooLarge,
    );
    expect(read.n).toBe(2);
  });

  it("limits an unenveloped body by its total size", async () => {
    const read = { n: 0 };
    const ok = new Uint8Array(100);
    expect(await drain(limitRequestBody(source(chunked(ok, [40, 40]), read), false, 100, () => new TooLarge()))).toBe(100);
    const big = new Uint8Array(101);
    await expect(drain(limitRequestBody(source(chunked(big, [50, 50]), read), false, 100, () => new TooLarge()))).rejects.toBeInstanceOf(
      TooLarge,
    );
  });

  it("knows which content types are enveloped", () => {
    const enveloped = (ct: string) => isEnveloped(wireProtocolOf(ct, true));
    expect(enveloped("application/grpc")).toBe(true);
    expect(enveloped("application/grpc+proto")).toBe(true);
    expect(enveloped("Application/gRPC-Web+proto")).toBe(true);
    expect(enveloped("application/connect+json")).toBe(true);
    expect(enveloped("application/proto")).toBe(false);
    expect(enveloped("application/json")).toBe(false);
    expect(enveloped("")).toBe(false);
  });

  it("tells the caller's protocol off an RPC path from its content type or Connect's header", () => {
    expect(wireProtocolOf("application/json", false)).toBe("rest");
    expect(wireProtocolOf("application/json", false, true)).toBe("connect");
    expect(wireProtocolOf("application/json", true)).toBe("connect");
    expect(wireProtocolOf("application/grpc-web-text", false)).toBe("grpc-web");
  });
});

describe("limitedCompression()", () => {
  const gzip = limitedCompression(compressionGzip, () => new TooLarge("too large"));

  it("round-trips a message within the limit", async () => {
    const bytes = new Uint8Array(1000).fill(3);
    expect(Buffer.from(await gzip.decompress(await gzip.compress(bytes), 1000))).toEqual(Buffer.from(bytes));
  });

  it("reports a message that inflates past the limit as the caller's error", async () => {
    const packed = await gzip.compress(new Uint8Array(1001).fill(3));
    await expect(gzip.decompress(packed, 1000)).rejects.toBeInstanceOf(TooLarge);
  });

  it("leaves corrupt data to connect's own invalid_argument", async () => {
    const err = await gzip.decompress(new Uint8Array([0x1f, 0x8b, 8, 0, 1, 2, 3, 4, 5, 6, 7]), 1000).catch((e) => e);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
  });
});
