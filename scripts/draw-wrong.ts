/**
 * draw:wrong draws each line an `eval:boxes --detail` read called WRONG over its photo, so that a person can tell a
 * right crease against a rough box from another crease (models/palm-lines/FROM-NOTHING.md, the thirty-ninth run).
 * The training part only: the evaluation quarter is scored by eval:boxes and never looked at line by line.
 */
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { LINE_NAMES, type LineName } from "../src/inference/analyzer-types.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import { BOX_DIR, type Box, partOf, readBoxes } from "./box-set.js";
import { scriptArgs } from "./cli.js";
import { grownBox } from "./eval-boxes.js";

const USAGE = `usage: npm run draw:wrong -- --detail FILE --out DIR [--model FILE]
  For every line that FILE (the output of eval:boxes --detail on the training part) calls WRONG, reads the photo
  again with the model and writes DIR/<photo>-<line>.png: the photo near the line as it is (left) and with the
  line's mask in red, its box in green and the box as the agreement rule grows it in yellow (right).`;

/** Wrong is one line an eval:boxes --detail row calls WRONG. */
export interface Wrong {
  file: string;
  line: LineName;
  /** The row's own words for the line ("WRONG in 61% iou 0.30 ..."). */
  said: string;
}

/** wrongLines reads the WRONG lines of eval:boxes --detail output (its rows are "<file> <reason>; <line> ...; ..."). */
export function wrongLines(detail: string): Wrong[] {
  const out: Wrong[] = [];
  for (const row of detail.split("\n")) {
    const m = /^(\S+)\s+\S+; (.*)$/.exec(row);
    if (!m) continue;
    for (const part of m[2].split("; ")) {
      const [line, verdict] = part.split(" ");
      if (verdict === "WRONG" && (LINE_NAMES as readonly string[]).includes(line)) {
        out.push({ file: m[1], line: line as LineName, said: part.slice(line.length + 1) });
      }
    }
  }
  return out;
}

/** SCALE: the drawing's pixels per photo pixel (the set's photos are 640 px; a crease is a pixel or two there). */
const SCALE = 2;
/** MARGIN: photo pixels shown around the grown box and the mask. */
const MARGIN = 30;

/** drawing is the side-by-side PNG for one line: `mask` (0/255, the photo's size) and its box, over `photo`. */
async function drawing(photo: Buffer, mask: Uint8Array, box: Box): Promise<Buffer> {
  // The mask is the photo's size as the engine read it (eval-boxes.ts maskAgreement reads it so too).
  const { data: m, info } = await sharp(mask).toColourspace("b-w").raw().toBuffer({ resolveWithObject: true });
  const W = info.width;
  const H = info.height;
  const g = grownBox(box);
  let [x0, y0, x1, y1] = g;
  for (let i = 0; i < m.length; i++) {
    if (m[i] < 128) continue;
    const x = i % W;
    const y = (i - x) / W;
    x0 = Math.min(x0, x);
    y0 = Math.min(y0, y);
    x1 = Math.max(x1, x + 1);
    y1 = Math.max(y1, y + 1);
  }
  const left = Math.max(0, Math.floor(x0 - MARGIN));
  const top = Math.max(0, Math.floor(y0 - MARGIN));
  const w = Math.min(W, Math.ceil(x1 + MARGIN)) - left;
  const h = Math.min(H, Math.ceil(y1 + MARGIN)) - top;
  const crop = await sharp(photo)
    .removeAlpha()
    .extract({ left, top, width: w, height: h })
    .resize(w * SCALE, h * SCALE, { kernel: "cubic" })
    .png()
    .toBuffer();
  // The mask as a red layer, half opaque where set.
  const red = Buffer.alloc(w * h * 4);
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      if (m[(y + top) * W + x + left] < 128) continue;
      red.set([255, 0, 0, 110], (y * w + x) * 4);
    }
  }
  const layer = await sharp(red, { raw: { width: w, height: h, channels: 4 } })
    .resize(w * SCALE, h * SCALE, { kernel: "nearest" })
    .png()
    .toBuffer();
  const rect = (b: Box, colour: string) =>
    `<rect x="${(b[0] - left) * SCALE}" y="${(b[1] - top) * SCALE}" width="${(b[2] - b[0]) * SCALE}" height="${(b[3] - b[1]) * SCALE}" fill="none" stroke="${colour}" stroke-width="2"/>`;
  const svg = Buffer.from(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${w * SCALE}" height="${h * SCALE}">${rect(box, "#0f0")}${rect(g, "#ff0")}</svg>`,
  );
  const marked = await sharp(crop)
    .composite([{ input: layer }, { input: svg }])
    .png()
    .toBuffer();
  return sharp({ create: { width: 2 * w * SCALE + 8, height: h * SCALE, channels: 3, background: "#fff" } })
    .composite([
      { input: crop, left: 0, top: 0 },
      { input: marked, left: w * SCALE + 8, top: 0 },
    ])
    .png()
    .toBuffer();
}

async function main(): Promise<number> {
  const args = scriptArgs(USAGE, {
    options: { detail: { type: "string" }, out: { type: "string" }, model: { type: "string" } },
  });
  if (typeof args === "number") return args;
  const { detail, out, model } = args.values;
  if (!detail || !out) {
    console.error(`draw:wrong needs --detail and --out\n${USAGE}`);
    return 2;
  }
  const wrong = wrongLines(await readFile(detail, "utf8"));
  if (wrong.some((w) => partOf(w.file) === "eval")) {
    console.error("draw:wrong: the evaluation quarter is scored by eval:boxes only, never drawn line by line");
    return 2;
  }
  const boxes = readBoxes();
  await mkdir(out, { recursive: true });
  const analyzer = await createAnalyzer({ modelPath: model, workers: 1 });
  try {
    for (const file of [...new Set(wrong.map((w) => w.file))]) {
      const photo = await readFile(join(BOX_DIR, "images", file));
      const result = await analyzer.analyze(photo);
      for (const w of wrong.filter((v) => v.file === file)) {
        const box = boxes.get(file)?.[w.line];
        if (!box || !result.stats[w.line].detected) {
          console.log(`${file} ${w.line}: not drawn now (${box ? "not detected on this read" : "no box"})`);
          continue;
        }
        const name = `${file.replace(/\.[^.]+$/, "")}-${w.line}.png`;
        await writeFile(join(out, name), await drawing(photo, result.masks[w.line], box));
        console.log(`${name}: ${w.said}`);
      }
    }
  } finally {
    await analyzer.close();
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
