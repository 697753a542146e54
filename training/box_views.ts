/**
 * Canonical views of the box set's training part, for training (palm-lines 3): each photo's hand
 * landmarks, the engine's canonical frame rendered at the model's input size, and each line's box
 * mapped into that view as a quadrilateral. The evaluation quarter (file-name SHA-256 starting
 * 0-3) is never read. Output (training/data/, git-ignored; the photos stay in ../shared):
 *   <out>/images.bin   N x S x S x 3 uint8 RGB
 *   <out>/meta.json    {size, frame_side, samples: [{file, boxes: {line: [[u,v] x4]}, landmarks: [[u,v] x21]}], missed: [file]}
 *
 *   node --import tsx training/box_views.ts --out training/data/boxes_train [--size 256] [--frame-side 1.7]
 * --frame-side: the palm frame's side in palm sizes (the engine's FRAME_SIDE unless set; training/run.sh FRAME).
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { decodeImage } from "../src/image/decode.js";
import { renderFrame, resizeToFit } from "../src/image/preprocess.js";
import type { Point } from "../src/landmarks/geometry.js";
import { createHandLandmarker, facing } from "../src/landmarks/hand-landmarker.js";
import { FRAME_SIDE, imageToFrame, palmFrame } from "../src/landmarks/palm-frame.js";
import { HAND_SEARCH_SIDE } from "../src/inference/pipeline.js";
import { BOX_DIR, partOf, readBoxes } from "../scripts/box-set.js";

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { out: { type: "string" }, size: { type: "string", default: "256" }, "frame-side": { type: "string", default: String(FRAME_SIDE) } },
  });
  if (!values.out) throw new Error("--out is required");
  const frameSide = Number(values["frame-side"]);
  if (!(frameSide >= 1 && frameSide <= 3)) throw new Error("--frame-side must be a number in [1, 3]");
  if (!existsSync(join(BOX_DIR, "boxes.csv"))) {
    console.error(`box_views: ${BOX_DIR} is absent; nothing to do`);
    return;
  }
  const S = Number(values.size);
  const boxes = readBoxes();
  const files = [...boxes.keys()].filter((f) => partOf(f) !== "eval").sort();
  const landmarker = await createHandLandmarker({ intraOpNumThreads: 1 });
  const chunks: Uint8Array[] = [];
  const samples: unknown[] = [];
  const missed: string[] = [];
  for (const file of files) {
    const image = await decodeImage(readFileSync(join(BOX_DIR, "images", file)));
    const small = await resizeToFit(image, HAND_SEARCH_SIDE);
    const found = await landmarker.detect(small.data, small.width, small.height);
    if (!found || facing(found) === "back") {
      missed.push(file);
      continue;
    }
    const k = image.width / small.width;
    const landmarks = found.landmarks.map(([x, y]): Point => [x * k, y * k]);
    const frame = palmFrame(landmarks, frameSide);
    chunks.push(await renderFrame(image, frame, S, 0));
    const quads: Record<string, Point[]> = {};
    for (const [line, [x0, y0, x1, y1]] of Object.entries(boxes.get(file)!)) {
      quads[line] = [
        [x0, y0],
        [x1, y0],
        [x1, y1],
        [x0, y1],
      ].map(([x, y]) => imageToFrame(frame, S, x, y));
    }
    samples.push({ file, boxes: quads, landmarks: landmarks.map(([x, y]) => imageToFrame(frame, S, x, y)) });
  }
  await landmarker.close();
  mkdirSync(values.out, { recursive: true });
  writeFileSync(join(values.out, "images.bin"), Buffer.concat(chunks));
  writeFileSync(join(values.out, "meta.json"), JSON.stringify({ size: S, frame_side: frameSide, samples, missed }));
  console.log(`box_views: ${samples.length} views, ${missed.length} photos without a palm found, of ${files.length}`);
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
