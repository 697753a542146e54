/**
 * eval-real: scores the analysis engine on the annotated real palm photos in
 * `<repo>/../shared/real-palms/` (never copied into the repository), as that folder's README
 * defines it, and on real photographs without a palm.
 *
 *     npm run eval:real [-- --out dir] [--model path] [--detail]
 *
 * Every photo is scored as taken and in five variants: mirrored, turned by 90, 180 and 270
 * degrees, and a close-up cut around its lines (the annotations move with it). Per line:
 * detected; mean distance from the mask pixels to the annotated polyline, as a fraction of
 * `palm_width_px`; coverage = share of the polyline
 * (sampled every pixel) with a mask pixel within 4% of the palm width; localised = detected &&
 * mean distance <= 4% && coverage >= 60%. Handedness is checked against the annotation's own
 * geometry (which side of the palm the head line starts on). Traits moved: per variant, the lines
 * drawn both on it and as taken whose traits differ beyond the bounds of real-photos.spec's
 * turned test (scripts/trait-stability.ts); all drawn lines, localised or not. Non-palm photos are the real
 * photographs Debian's python3-skimage ships (when installed): how many get a line, and why not.
 * `--out dir` also writes, per photo as taken, the overlay with the annotations drawn in white
 * (`.overlay.jpg`, a copy of the photo: keep it out of the repository) and the same lines without
 * the photo (`.lines.png`, the masks in their colours and the annotations on grey, around the
 * palm, at most 480 px: what the model card shows).
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import sharp, { type Sharp } from "sharp";
import { type AnalysisResult, LINE_NAMES, type LineName } from "../src/inference/analyzer-types.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import { scriptArgs } from "./cli.js";
import { closeupSquare } from "./eval-boxes.js";
import { polylineDistance, REAL_DIR as REAL, type RealAnnotation, readRealAnnotations, trueHandedness } from "./real-palms.js";
import { TurnTally } from "./trait-stability.js";

/** Distance bound of "localised", as a fraction of palm_width_px. */
const MAX_DIST = 0.04;
/** Coverage bound of "localised". */
const MIN_COVERAGE = 0.6;
/** Real photographs without a palm, from Debian's python3-skimage data folder. */
export const NON_PALM_DIR = "/usr/lib/python3/dist-packages/skimage/data";
export const NON_PALM = [
  "astronaut.png",
  "brick.png",
  "camera.png",
  "chelsea.png",
  "coffee.png",
  "coins.png",
  "grass.png",
  "gravel.png",
  "hubble_deep_field.jpg",
  "moon.png",
  "motorcycle_left.png",
  "page.png",
  "retina.jpg",
  "rocket.jpg",
  "text.png",
];

/** Variant is one way the photo may have been taken: the transform of the pixels and of a point. */
interface Variant {
  name: string;
  apply(img: Sharp, a: RealAnnotation): Sharp;
  point(p: Point, a: RealAnnotation): Point;
}

/**
 * closeUp is the square of a close-up of `a` (as `eval:boxes --degrade closeup` cuts one): around
 * its annotated lines, grown by a quarter of its side on each side, moved to lie inside the photo.
 */
function closeUp(a: RealAnnotation): { left: number; top: number; side: number } {
  const pts = LINE_NAMES.flatMap((line) => a.lines[line]?.points ?? []);
  const [xs, ys] = [pts.map((p) => p[0]), pts.map((p) => p[1])];
  const square = closeupSquare([Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)]);
  const side = Math.min(a.width, a.height, square.side);
  const inside = (v: number, room: number) => Math.max(0, Math.min(room - side, Math.round(v - side / 2)));
  return { left: inside(square.cx, a.width), top: inside(square.cy, a.height), side };
}

const VARIANTS: Variant[] = [
  { name: "as taken", apply: (i) => i, point: (p) => p },
  { name: "mirrored", apply: (i) => i.flop(), point: ([x, y], a) => [a.width - x, y] },
  { name: "turned 90", apply: (i) => i.rotate(90), point: ([x, y], a) => [a.height - y, x] },
  { name: "turned 180", apply: (i) => i.rotate(180), point: ([x, y], a) => [a.width - x, a.height - y] },
  { name: "turned 270", apply: (i) => i.rotate(270), point: ([x, y], a) => [y, a.width - x] },
  // The palm filling the frame, the fingers cut off, at the photo's own resolution (the palm width keeps its pixels).
  {
    name: "close-up",
    apply: (i, a) => {
      const { left, top, side } = closeUp(a);
      return i.extract({ left, top, width: side, height: side });
    },
    point: ([x, y], a) => {
      const { left, top } = closeUp(a);
      return [x - left, y - top];
    },
  },
];

type Annotation = RealAnnotation & { lines: Record<LineName, { points: Point[]; confidence: string }> };

type Point = [number, number];

/** Points along the polyline, one per pixel of length. */
function samplePolyline(pts: Point[]): Point[] {
  const out: Point[] = [];
  for (let i = 1; i < pts.length; i++) {
    const [ax, ay] = pts[i - 1];
    const [bx, by] = pts[i];
    const n = Math.max(1, Math.ceil(Math.hypot(bx - ax, by - ay)));
    for (let k = 0; k < n; k++) out.push([ax + ((bx - ax) * k) / n, ay + ((by - ay) * k) / n]);
  }
  out.push(pts[pts.length - 1]);
  return out;
}

/** LineScore is one row of the table. */
interface LineScore {
  detected: boolean;
  pixels: number;
  meanDist: number;
  coverage: number;
  localised: boolean;
}

function scoreLine(mask: Uint8Array, width: number, height: number, pts: Point[], palmWidth: number, detected: boolean): LineScore {
  let n = 0;
  let sum = 0;
  for (let y = 0; y < height; y++) {
    const row = y * width;
    for (let x = 0; x < width; x++) {
      if (mask[row + x]) {
        n++;
        sum += polylineDistance(x, y, pts);
      }
    }
  }
  const meanDist = n > 0 ? sum / n / palmWidth : Infinity;
  const r = MAX_DIST * palmWidth;
  const r2 = r * r;
  const samples = samplePolyline(pts);
  let covered = 0;
  if (n > 0) {
    for (const [sx, sy] of samples) {
      let hit = false;
      for (let y = Math.max(0, Math.floor(sy - r)); y <= Math.min(height - 1, Math.ceil(sy + r)) && !hit; y++) {
        const row = y * width;
        for (let x = Math.max(0, Math.floor(sx - r)); x <= Math.min(width - 1, Math.ceil(sx + r)); x++) {
          if (mask[row + x] && (x - sx) ** 2 + (y - sy) ** 2 <= r2) {
            hit = true;
            break;
          }
        }
      }
      if (hit) covered++;
    }
  }
  const coverage = covered / samples.length;
  return { detected, pixels: n, meanDist, coverage, localised: detected && meanDist <= MAX_DIST && coverage >= MIN_COVERAGE };
}

function annotationSvg(a: Annotation): Buffer {
  const stroke = Math.max(2, Math.round(a.width / 800));
  const lines = LINE_NAMES.map(
    (l) =>
      `<polyline points="${a.lines[l].points.map((p) => p.join(",")).join(" ")}" fill="none" stroke="white" stroke-width="${stroke}" stroke-dasharray="${stroke * 4},${stroke * 3}"/>`,
  ).join("");
  return Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${a.width}" height="${a.height}">${lines}</svg>`);
}

/**
 * linesPicture draws the engine's masks (heart red, head blue, life green) and the annotations
 * (white, dashed) on grey, around the palm (the annotated lines' box widened by 0.6 palm widths),
 * at most 480 px: no pixel of the photo.
 */
async function linesPicture(
  a: Annotation,
  result: { width: number; height: number; masks: Record<LineName, Uint8Array> },
): Promise<Buffer> {
  const pts = LINE_NAMES.flatMap((l) => a.lines[l].points);
  const pad = 0.6 * a.palm_width_px;
  const x0 = Math.max(0, Math.floor(Math.min(...pts.map((p) => p[0])) - pad));
  const y0 = Math.max(0, Math.floor(Math.min(...pts.map((p) => p[1])) - pad));
  const x1 = Math.min(a.width, Math.ceil(Math.max(...pts.map((p) => p[0])) + pad));
  const y1 = Math.min(a.height, Math.ceil(Math.max(...pts.map((p) => p[1])) + pad));
  const scale = 480 / Math.max(x1 - x0, y1 - y0);
  const w = Math.round((x1 - x0) * scale);
  const h = Math.round((y1 - y0) * scale);
  const colours: Record<LineName, [number, number, number]> = { heart: [230, 40, 40], head: [40, 80, 240], life: [30, 200, 60] };
  const layers = [];
  for (const line of LINE_NAMES) {
    const [r, g, b] = colours[line];
    const alpha = await sharp(result.masks[line])
      .extract({ left: x0, top: y0, width: x1 - x0, height: y1 - y0 })
      .resize(w, h, { kernel: "linear" })
      .toColourspace("b-w")
      .raw()
      .toBuffer();
    const rgba = Buffer.alloc(w * h * 4);
    for (let i = 0; i < w * h; i++) {
      rgba[i * 4] = r;
      rgba[i * 4 + 1] = g;
      rgba[i * 4 + 2] = b;
      rgba[i * 4 + 3] = Math.min(255, alpha[i] * 3);
    }
    layers.push({ input: rgba, raw: { width: w, height: h, channels: 4 as const } });
  }
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${w}" height="${h}">${LINE_NAMES.map(
    (l) =>
      `<polyline points="${a.lines[l].points.map(([x, y]) => `${(x - x0) * scale},${(y - y0) * scale}`).join(" ")}" fill="none" stroke="white" stroke-width="1.5" stroke-dasharray="5,4"/>`,
  ).join("")}</svg>`;
  return sharp({ create: { width: w, height: h, channels: 3, background: { r: 70, g: 70, b: 70 } } })
    .composite([...layers, { input: Buffer.from(svg) }])
    .png()
    .toBuffer();
}

const USAGE = `usage: npm run eval:real [-- --out DIR] [--model FILE] [--detail]
  Scores the engine on the annotated real palm photos (${REAL}) as taken, mirrored, turned by 90, 180 and 270
  degrees and as a close-up, and on real photographs without a palm.
  --out DIR     also write each photo's overlay and its lines (copies of the photos: keep them out of the repository)
  --model FILE  another line model in place of the released one
  --detail      the per-line table for every variant, not only as taken`;

async function main(): Promise<number> {
  const args = scriptArgs(USAGE, { options: { out: { type: "string" }, model: { type: "string" }, detail: { type: "boolean" } } });
  if (typeof args === "number") return args;
  const { values } = args;
  if (!existsSync(join(REAL, "annotations.json"))) {
    console.log(`eval-real: ${REAL} is absent; nothing to evaluate.`);
    return 0;
  }
  // Scored: the photos whose three lines are annotated (a line not visible is left out of the file).
  const annotations = { images: readRealAnnotations().filter((a): a is Annotation => trueHandedness(a.lines) !== undefined) };
  const analyzer = await createAnalyzer({ modelPath: values.model, workers: 1 });
  const header = [
    "image".padEnd(14),
    "line".padEnd(6),
    "annot".padEnd(7),
    "detected".padEnd(9),
    "pixels".padStart(8),
    "mean dist".padStart(10),
    "coverage".padStart(9),
    "localised",
  ].join(" ");
  const detail: string[] = [];
  const summary: string[] = [];
  // Each variant's traits against the photo's as taken, line by line (trait-stability.ts).
  const asTaken = new Map<string, AnalysisResult["stats"]>();
  try {
    console.log(`model ${analyzer.model}`);
    for (const variant of VARIANTS) {
      const count = { heart: 0, head: 0, life: 0 } as Record<LineName, number>;
      let wrong = 0;
      let hands = 0;
      let ms = 0;
      const turn = new TurnTally();
      for (const a of annotations.images) {
        const original = await readFile(join(REAL, a.file));
        const bytes =
          variant.name === "as taken" ? original : await variant.apply(sharp(original).rotate(), a).jpeg({ quality: 95 }).toBuffer();
        const t0 = performance.now();
        const result = await analyzer.analyze(bytes);
        ms += performance.now() - t0;
        const truth = trueHandedness(a.lines);
        const expected = variant.name === "mirrored" ? (truth === "left" ? "right" : "left") : truth;
        if (result.hand?.handedness === expected) hands++;
        if (variant.name === "as taken") asTaken.set(a.file, result.stats);
        for (const line of LINE_NAMES) {
          if (variant.name !== "as taken") turn.add(asTaken.get(a.file)?.[line].traits, result.stats[line].traits);
          const pts = a.lines[line].points.map((p) => variant.point(p, a));
          const { data } = await sharp(result.masks[line]).toColourspace("b-w").raw().toBuffer({ resolveWithObject: true });
          const s = scoreLine(data, result.width, result.height, pts, a.palm_width_px, result.stats[line].detected);
          if (s.localised) count[line]++;
          else if (s.detected) wrong++;
          if (variant.name === "as taken" || values.detail) {
            detail.push(
              [
                a.file.padEnd(14),
                line.padEnd(6),
                a.lines[line].confidence.padEnd(7),
                (s.detected ? "yes" : "no").padEnd(9),
                String(s.pixels).padStart(8),
                (Number.isFinite(s.meanDist) ? `${(100 * s.meanDist).toFixed(1)}%` : "-").padStart(10),
                `${(100 * s.coverage).toFixed(1)}%`.padStart(9),
                s.localised ? "LOCALISED" : "-",
                line === "heart"
                  ? `${variant.name}; hand ${result.hand?.handedness ?? "-"} (truth ${expected})${result.reason ? `; ${result.reason}` : ""}`
                  : "",
              ].join(" "),
            );
          }
        }
        if (values.out && variant.name === "as taken") {
          await mkdir(values.out, { recursive: true });
          await writeFile(join(values.out, `${a.file.replace(/\.[^.]+$/, "")}.lines.png`), await linesPicture(a, result));
          await sharp(result.overlay)
            .composite([{ input: annotationSvg(a) }])
            .jpeg({ quality: 85 })
            .toFile(join(values.out, `${a.file.replace(/\.[^.]+$/, "")}.overlay.jpg`));
        }
      }
      const n = annotations.images.length;
      const total = count.heart + count.head + count.life;
      summary.push(
        [
          variant.name.padEnd(11),
          `${total}/${3 * n}`.padStart(6),
          `${count.heart}/${n}`.padStart(6),
          `${count.head}/${n}`.padStart(6),
          `${count.life}/${n}`.padStart(6),
          `${hands}/${n}`.padStart(11),
          String(wrong).padStart(12),
          `${Math.round(ms / n)} ms`.padStart(9),
          (variant.name === "as taken" ? "-" : `${turn.moved}/${turn.pairs}`).padStart(13),
        ].join(" "),
      );
    }
    const nonPalm: string[] = [];
    let withLine = 0;
    let tried = 0;
    for (const file of NON_PALM) {
      const path = join(NON_PALM_DIR, file);
      if (!existsSync(path)) continue;
      // PNGs there may be grey or palette images: the engine takes them as any client's PNG.
      const bytes = await sharp(await readFile(path))
        .toColourspace("srgb")
        .png()
        .toBuffer();
      const result = await analyzer.analyze(bytes);
      const lines = LINE_NAMES.filter((l) => result.stats[l].detected);
      tried++;
      if (lines.length) withLine++;
      nonPalm.push(
        `${file.padEnd(22)} ${lines.length ? `LINES: ${lines.join(",")}` : "no line"}; reason ${result.reason || "-"}${result.hand ? `; hand ${result.hand.handedness}` : ""}`,
      );
    }
    console.log(header);
    for (const r of detail) console.log(r);
    console.log(
      `\nlocalised (mean distance <= ${MAX_DIST * 100}% of palm width, coverage >= ${MIN_COVERAGE * 100}%), handedness right, lines drawn but not localised, mean engine time, lines drawn on both whose traits moved from the photo as taken beyond the bounds of real-photos.spec's turned test:`,
    );
    const summaryHeader = [
      "variant".padEnd(11),
      "lines".padStart(6),
      "heart".padStart(6),
      "head".padStart(6),
      "life".padStart(6),
      "handedness".padStart(11),
      "drawn wrong".padStart(12),
      "time".padStart(9),
      "traits moved".padStart(13),
    ].join(" ");
    console.log(summaryHeader);
    for (const r of summary) console.log(r);
    if (tried) {
      console.log(`\nreal photos without a palm (${NON_PALM_DIR}): ${withLine}/${tried} with a line`);
      for (const r of nonPalm) console.log(r);
    } else {
      console.log(`\nno photos without a palm: install python3-skimage for ${NON_PALM_DIR}`);
    }
    if (values.out) {
      await writeFile(
        join(values.out, "eval-real.txt"),
        [header, ...detail, "", summaryHeader, ...summary, "", `non-palm: ${withLine}/${tried} with a line`, ...nonPalm, ""].join("\n"),
      );
    }
  } finally {
    await analyzer.close();
  }
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`)
  main().then(
    (code) => (process.exitCode = code),
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : e);
      process.exitCode = 1;
    },
  );
