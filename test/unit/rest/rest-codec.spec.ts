import { create, equals } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import type { Worker } from "node:worker_threads";
import { afterEach, describe, expect, it } from "vitest";
import { BadRequestSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { AnalyzeRequestSchema, AnalyzeResponseSchema } from "../../../gen/palm/v1/palm_pb.js";
import { reasonOf } from "../../../src/errors.js";
import { bytesIn, createRestCodec, type RestCodec } from "../../../src/rest/rest-codec.js";
import { decodeRestBody, encodeRestBody } from "../../../src/rest/rest-json.js";
import { spawnWorker } from "../../../src/workers/worker-thread.js";
import { catchError } from "../../helpers/in-memory.js";

const image = randomBytes(300 * 1024); // a body well over the offload size
const body = (obj: unknown) => Buffer.from(JSON.stringify(obj));

function response(overlay: Uint8Array) {
  return create(AnalyzeResponseSchema, {
    id: "palm_x",
    created: 1763800000n,
    results: { overlay, masks: { heart: overlay.subarray(0, 10) }, stats: { heart: { pixels: 5n, detected: true } } },
    usage: { requestsUsed: 17n, requestsLimit: 1000n, plan: "starter", resetsAt: 1764547200n },
    model: "palm-lines-1.0.0",
  });
}

/** trackedCodec is a one-thread codec that records the workers it starts. */
function trackedCodec(): { started: Worker[]; codec: RestCodec } {
  const started: Worker[] = [];
  const codec = createRestCodec({
    threads: 1,
    spawn: (url, data) => {
      const w = spawnWorker(url, data);
      started.push(w);
      return w;
    },
  });
  return { started, codec };
}

describe("REST codec", () => {
  let codec: RestCodec | undefined;
  afterEach(async () => {
    await codec?.close();
    codec = undefined;
  });

  it("decodes a large body in a worker to exactly the message the inline decoder gives", async () => {
    codec = createRestCodec({ threads: 1 });
    const bytes = body({ image: image.toString("base64url"), extra: { a: [1, 2] } });
    const msg = await codec.decode(AnalyzeRequestSchema, "*", bytes);
    expect(Buffer.from(msg.image).equals(image)).toBe(true);
    expect(equals(AnalyzeRequestSchema, msg, decodeRestBody(AnalyzeRequestSchema, "*", bytes))).toBe(true);
  });

  it("encodes a response with image bytes in a worker to the same JSON as inline", async () => {
    codec = createRestCodec({ threads: 2 });
    const msg = response(image);
    const out = await codec.encode(AnalyzeResponseSchema, msg);
    expect(Buffer.from(out).equals(encodeRestBody(AnalyzeResponseSchema, msg))).toBe(true);
    const json = JSON.parse(Buffer.from(out).toString());
    expect(Buffer.from(json.results.overlay, "base64").equals(image)).toBe(true);
    expect(json.usage.requests_used).toBe(17);
    // the caller's message is left as it was
    expect(msg.results!.overlay).toBe(image);
  });

  it("keeps the reason and the BadRequest field of errors raised in the worker", async () => {
    codec = createRestCodec({ threads: 1 });
    const bad = await catchError(codec.decode(AnalyzeRequestSchema, "*", body({ image: "*".repeat(image.byteLength) })));
    expect([bad.code, reasonOf(bad)]).toEqual([Code.InvalidArgument, "invalid_base64"]);
    expect(bad.findDetails(BadRequestSchema)[0]?.fieldViolations[0]?.field).toBe("image");

    const notJson = await catchError(
      codec.decode(
        AnalyzeRequestSchema,
        "*",
        Buffer.concat([body({ image: "aGk=" }), Buffer.alloc(image.byteLength, 0x20), Buffer.from("}")]),
      ),
    );
    expect(reasonOf(notJson)).toBe("invalid_json");
    const array = await catchError(codec.decode(AnalyzeRequestSchema, "*", body([image.toString("base64")])));
    expect(reasonOf(array)).toBe("invalid_json");
    const latin1 = Buffer.concat([Buffer.from('{"image":"aGk=","x":"'), Buffer.alloc(image.byteLength, 0xe9), Buffer.from('"}')]);
    expect(reasonOf(await catchError(codec.decode(AnalyzeRequestSchema, "*", latin1)))).toBe("invalid_json");
  });

  it("survives a dead worker: its pending job is redone inline, the next job gets a fresh worker", async () => {
    const { started, codec: tracked } = trackedCodec();
    codec = tracked;
    const bytes = body({ image: image.toString("base64") });
    await codec.decode(AnalyzeRequestSchema, "*", bytes);
    expect(started).toHaveLength(1);
    const pending = codec.decode(AnalyzeRequestSchema, "*", bytes);
    const encoding = codec.encode(AnalyzeResponseSchema, response(image));
    await started[0].terminate();
    expect(Buffer.from((await pending).image).equals(image)).toBe(true);
    expect(Buffer.from(await encoding).equals(encodeRestBody(AnalyzeResponseSchema, response(image)))).toBe(true);
    // an input error is still the input's error after the fallback
    expect(reasonOf(await catchError(codec.decode(AnalyzeRequestSchema, "*", body({ image: "*".repeat(image.byteLength) }))))).toBe(
      "invalid_base64",
    );
    const again = await codec.decode(AnalyzeRequestSchema, "*", bytes);
    expect(Buffer.from(again.image).equals(image)).toBe(true);
    expect(started).toHaveLength(2);
  });

  it("encodes an answer without images inline, and only one carrying images in a worker", async () => {
    const { started, codec: tracked } = trackedCodec();
    codec = tracked;
    const lean = response(new Uint8Array(0));
    expect(Buffer.from(await codec.encode(AnalyzeResponseSchema, lean)).equals(encodeRestBody(AnalyzeResponseSchema, lean))).toBe(true);
    expect(started).toHaveLength(0);
    await codec.encode(AnalyzeResponseSchema, response(image));
    expect(started).toHaveLength(1);
  });

  it("counts the bytes of nested bytes fields", () => {
    expect(bytesIn(AnalyzeResponseSchema, response(image))).toBe(image.byteLength + 10);
    expect(bytesIn(AnalyzeResponseSchema, response(new Uint8Array(0)))).toBe(0);
    expect(bytesIn(AnalyzeResponseSchema, response(image), 1000)).toBeGreaterThanOrEqual(1000);
  });

  it("decodes small bodies inline and refuses work once closed", async () => {
    codec = createRestCodec({ threads: 1 });
    const msg = await codec.decode(AnalyzeRequestSchema, "*", body({ image: "aGk=" }));
    expect(Buffer.from(msg.image).toString()).toBe("hi");
    await codec.close();
    const err = await codec.decode(AnalyzeRequestSchema, "*", body({ image: image.toString("base64") })).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect(err).not.toBeInstanceOf(ConnectError);
  });

  it("hands out the jobs of different clients in turn: one client's backlog of rejected bodies does not hold up another's", async () => {
    codec = createRestCodec({ threads: 1 });
    const done: string[] = [];
    const track = (label: string, p: Promise<unknown>) =>
      p.then(
        () => done.push(label),
        (e: unknown) => done.push(`${label}:${reasonOf(e as ConnectError) ?? String(e)}`),
      );
    // An attacker's 6 bodies of invalid base64, then a victim's ordinary one, then the attacker's 7th.
    const invalid = body({ image: `${image.toString("base64")}*` });
    const attacker = Array.from({ length: 6 }, (_, i) =>
      track(`a${i}`, codec!.decode(AnalyzeRequestSchema, "*", invalid, { client: "mallory" })),
    );
    const victim = track("victim", codec.decode(AnalyzeRequestSchema, "*", body({ image: image.toString("base64") }), { client: "alice" }));
    const late = track("a6", codec.decode(AnalyzeRequestSchema, "*", invalid, { client: "mallory" }));
    await Promise.all([...attacker, victim, late]);
    // The attacker's first body was already in the worker; the victim's goes next, not seventh.
    expect(done.slice(0, 2)).toEqual(["a0:invalid_base64", "victim"]);
    expect(done).toHaveLength(8);
  });

  it("drops a job whose request went away while it waited, with the request's reason", async () => {
    codec = createRestCodec({ threads: 1 });
    const bytes = body({ image: image.toString("base64") });
    const first = codec.decode(AnalyzeRequestSchema, "*", bytes, { client: "a" });
    const gone = new AbortController();
    const waiting = codec.decode(AnalyzeRequestSchema, "*", bytes, { client: "b", signal: gone.signal }).then(
      () => "decoded",
      (e: unknown) => e,
    );
    gone.abort("client gone");
    expect(await waiting).toBe("client gone");
    expect(Buffer.from((await first).image).equals(image)).toBe(true);
  });

  it("encodes small answers inline, so they never wait behind another client's large job, and large ones in a worker", async () => {
    const { started, codec: tracked } = trackedCodec();
    codec = tracked;
    // 40 KiB of image bytes in all (overlay and masks): base64 under 64 KiB.
    const small = response(image.subarray(0, 40 * 1024));
    expect(Buffer.from(await codec.encode(AnalyzeResponseSchema, small)).equals(encodeRestBody(AnalyzeResponseSchema, small))).toBe(true);
    expect(started).toHaveLength(0);
    const large = response(image);
    expect(Buffer.from(await codec.encode(AnalyzeResponseSchema, large)).equals(encodeRestBody(AnalyzeResponseSchema, large))).toBe(true);
    expect(started).toHaveLength(1);
  });
});
