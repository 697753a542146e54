import { readFileSync, writeFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ModelMetadataError, parseModelMetadata, readOnnxMetadataProps } from "../../../src/inference/model-metadata.js";
import { DEFAULT_MODEL_PATH, ModelLoadError, createModelSession, loadModelMetadata } from "../../../src/inference/model-session.js";

function varint(n: number): number[] {
  const out: number[] = [];
  while (n >= 0x80) {
    out.push((n & 0x7f) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

function lenField(field: number, payload: Uint8Array): Uint8Array {
  return Uint8Array.from([...varint((field << 3) | 2), ...varint(payload.length), ...payload]);
}

function concat(...parts: Uint8Array[]): Uint8Array {
  return Uint8Array.from(parts.flatMap((p) => Array.from(p)));
}

/** A minimal ModelProto: ir_version, an empty graph, and the given metadata_props. */
function modelProto(props: Record<string, string>): Uint8Array {
  const enc = new TextEncoder();
  const entries = Object.entries(props).map(([k, v]) => lenField(14, concat(lenField(1, enc.encode(k)), lenField(2, enc.encode(v)))));
  return concat(Uint8Array.from([0x08, 0x08]), lenField(7, new Uint8Array(0)), ...entries);
}

/** Re-writes a real ONNX file without its top-level field 14 (metadata_props). */
function stripMetadata(bytes: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  let pos = 0;
  const read = (): number => {
    let r = 0;
    let m = 1;
    for (;;) {
      const b = bytes[pos++];
      r += (b & 0x7f) * m;
      if (!(b & 0x80)) return r;
      m *= 128;
    }
  };
  while (pos < bytes.length) {
    const start = pos;
    const tag = read();
    const wt = tag & 7;
    if (wt === 0) read();
    else if (wt === 2) {
      const len = read();
      pos += len;
    } else if (wt === 1) pos += 8;
    else if (wt === 5) pos += 4;
    if (tag >>> 3 !== 14) parts.push(bytes.subarray(start, pos));
  }
  return Buffer.concat(parts);
}

const FULL = {
  model_name: "palm-lines",
  model_version: "1.2.3",
  input_size: "256",
  channel_order: "RGB",
  normalization: '{"scale":255,"mean":[0.1,0.2,0.3],"std":[0.5,0.5,0.5]}',
  letterbox: "center,pad=0",
  output_names: "palm,heart,head,life",
  thresholds: '{"palm":0.5,"heart":0.4,"head":0.45,"life":0.55}',
  detection: '{"min_pixels":30,"min_confidence":0.6,"min_lines":2}',
  crop: '{"margin":0.2,"min_palm":0.12,"proposal":0.3}',
};

describe("readOnnxMetadataProps()", () => {
  it("reads every metadata_props entry of a ModelProto", () => {
    expect(readOnnxMetadataProps(modelProto(FULL))).toEqual(FULL);
  });

  it("reads the metadata of the committed model", () => {
    const props = readOnnxMetadataProps(readFileSync(DEFAULT_MODEL_PATH));
    expect(props.model_name).toBe("palm-lines");
    expect(props.output_names).toBe("palm,heart,head,life");
  });

  it("rejects bytes that are not an ONNX model", () => {
    expect(() => readOnnxMetadataProps(Buffer.from("this is not a model at all"))).toThrow(ModelMetadataError);
    expect(() => readOnnxMetadataProps(new Uint8Array(0))).toThrow(/no graph/);
  });
});

describe("parseModelMetadata()", () => {
  it("builds the model name and reads every field", () => {
    const m = parseModelMetadata(FULL);
    expect(m.model).toBe("palm-lines-1.2.3");
    expect(m.inputSize).toBe(256);
    expect(m.normalization).toEqual({ scale: 255, mean: [0.1, 0.2, 0.3], std: [0.5, 0.5, 0.5] });
    expect(m.channels).toEqual({ palm: 0, heart: 1, head: 2, life: 3 });
    expect(m.thresholds).toEqual({ palm: 0.5, heart: 0.4, head: 0.45, life: 0.55 });
    expect(m.detection).toEqual({ minPixels: 30, minConfidence: 0.6, minLines: 2 });
    expect(m.cropMinPalm).toBe(0.12);
    expect(m).not.toHaveProperty("cropMargin"); // crop.margin and crop.proposal: the two-pass engine's, ignored
  });

  it("maps output channels by name, in any order", () => {
    expect(parseModelMetadata({ ...FULL, output_names: "life,head,heart,palm" }).channels).toEqual({ palm: 3, heart: 2, head: 1, life: 0 });
  });

  it("applies the defaults of absent optional keys", () => {
    const { channel_order, normalization, letterbox, detection, crop, ...required } = FULL;
    void [channel_order, normalization, letterbox, detection, crop];
    const m = parseModelMetadata(required);
    expect(m.channelOrder).toBe("RGB");
    expect(m.normalization).toEqual({ scale: 255, mean: [0, 0, 0], std: [1, 1, 1] });
    expect(m.letterboxPad).toBe(0);
    expect(m.detection).toEqual({ minPixels: 20, minConfidence: 0.5, minLines: 1 });
    expect(m.cropMinPalm).toBe(0);
    expect(m.grow).toEqual({ heart: m.thresholds.heart, head: m.thresholds.head, life: m.thresholds.life });
  });

  it("reads the palm frame's side a model was trained at, 1.7 when the file names none", () => {
    expect(parseModelMetadata(FULL).frameSide).toBe(1.7);
    expect(parseModelMetadata({ ...FULL, frame_side: "1.3" }).frameSide).toBe(1.3);
    for (const bad of ["0.5", "4", "wide", ""]) {
      expect(() => parseModelMetadata({ ...FULL, frame_side: bad }), bad).toThrow(/"frame_side" must be a number in \[1, 3\]/);
    }
  });

  it("reads per-line grow thresholds, a missing line keeping its own threshold", () => {
    const m = parseModelMetadata({ ...FULL, grow: '{"life":0.2,"head":0.3}' });
    expect(m.grow).toEqual({ heart: 0.4, head: 0.3, life: 0.2 });
  });

  it.each([
    [{ model_name: undefined }, 'required metadata "model_name" is missing'],
    [{ thresholds: undefined }, 'required metadata "thresholds" is missing'],
    [{ thresholds: "{oops" }, 'metadata "thresholds" is not valid JSON'],
    [{ thresholds: '{"palm":0.5,"heart":2,"head":0.5,"life":0.5}' }, "thresholds.heart must be a number in [0, 1]"],
    [{ output_names: "palm,heart,head" }, 'metadata "output_names" lacks "life"'],
    [{ crop: '{"margin":0.2,"min_palm":1.5}' }, "crop.min_palm must be a number in [0, 1]"],
    [{ detection: '{"min_lines":4}' }, "detection.min_lines must be a number in [1, 3]"],
    [{ grow: '{"life":0.9}' }, "grow.life must be a number in [0, 0.55]"],
    [{ detection: '{"min_lines":1.5}' }, "detection.min_lines must be an integer"],
    [{ input_size: "big" }, 'metadata "input_size" must be an integer'],
    [{ channel_order: "GBR" }, 'metadata "channel_order" must be RGB or BGR'],
    [{ letterbox: "top-left" }, 'metadata "letterbox" must start with "center"'],
  ])("rejects %o with a message naming the key", (change, message) => {
    const props: Record<string, string> = { ...FULL };
    for (const [k, v] of Object.entries(change)) {
      if (v === undefined) delete props[k];
      else props[k] = v;
    }
    expect(() => parseModelMetadata(props)).toThrow(message);
  });
});

describe("createModelSession()", () => {
  const dir = mkdtempSync(join(tmpdir(), "palm-model-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("fails start-up with a clear message for a missing file", async () => {
    await expect(createModelSession({ modelPath: join(dir, "missing.onnx") })).rejects.toThrow(ModelLoadError);
    await expect(loadModelMetadata(join(dir, "missing.onnx"))).rejects.toThrow(/Cannot read the model file .*missing\.onnx/);
  });

  it("fails start-up with a clear message for a malformed file", async () => {
    const bad = join(dir, "bad.onnx");
    writeFileSync(bad, "not an onnx file");
    await expect(createModelSession({ modelPath: bad })).rejects.toThrow(/is not a usable palm-lines ONNX model/);
  });

  it("fails start-up with a clear message for a model without metadata", async () => {
    const bare = join(dir, "bare.onnx");
    writeFileSync(bare, stripMetadata(readFileSync(DEFAULT_MODEL_PATH)));
    await expect(createModelSession({ modelPath: bare })).rejects.toThrow(/required metadata "model_name" is missing/);
  });

  it("loads, warms up and runs the committed model: [1,4,S,S] probabilities in [0,1]", async () => {
    const session = await createModelSession({});
    try {
      const S = session.metadata.inputSize;
      const out = await session.run(new Float32Array(3 * S * S).fill(0.5));
      expect(out.length).toBe(4 * S * S);
      let min = Infinity;
      let max = -Infinity;
      for (const v of out) {
        if (v < min) min = v;
        if (v > max) max = v;
      }
      expect(min).toBeGreaterThanOrEqual(0);
      expect(max).toBeLessThanOrEqual(1);
    } finally {
      await session.release();
    }
  });
});
