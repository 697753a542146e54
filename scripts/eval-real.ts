/**
 * eval-real: scores the analysis engine on the annotated real palm photos in
 * `<repo>/../shared/real-palms/` (never copied into the repository), as that folder's README
 * defines it.
 *
 *     npm run eval:real [-- --out dir] [--model path]
 *
 * For each photo the ENGINE runs on the original full-size file; its masks are decoded and,
 * per line: detected; mean distance from the mask pixels to the annotated polyline, as a
 * fraction of `palm_width_px`; coverage = share of the polyline (sampled every pixel) with a
 * mask pixel within 4% of the palm width; localised = detected && mean distance <= 4% &&
 * coverage >= 60%. Prints a table and "N/9 localised". `--out dir` also writes, per photo,
 * the overlay with the annotations drawn in white.
 */
import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import sharp from "sharp";
import { LINE_NAMES, type LineName } from "../src/inference/analyzer-types.js";
import { createAnalyzer } from "../src/inference/analyzer.js";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const REAL = resolve(REPO, "../shared/real-palms");
/** Distance bound of "localised", as a fraction of palm_width_px. */
const MAX_DIST = 0.04;
/** Coverage bound of "localised". */
const MIN_COVERAGE = 0.6;

interface Annotation {
  file: string;
  width: number;
  height: number;
  palm_width_px: number;
  lines: Record<LineName, { points: [number, number][]; confidence: string }>;
}

type Point = [number, number];

function segmentDistance(px: number, py: number, a: Point, b: Point): number {
  const dx = b[0] - a[0];
  const dy = b[1] - a[1];
  const len2 = dx * dx + dy * dy;
  let t = len2 > 0 ? ((px - a[0]) * dx + (py - a[1]) * dy) / len2 : 0;
  t = Math.max(0, Math.min(1, t));
  const x = a[0] + t * dx - px;
  const y = a[1] + t * dy - py;
  return Math.sqrt(x * x + y * y);
}

function polylineDistance(px: number, py: number, pts: Point[]): number {
  let d = Infinity;
  for (let i = 1; i < pts.length; i++) d = Math.min(d, segmentDistance(px, py, pts[i - 1], pts[i]));
  return pts.length === 1 ? Math.hypot(px - pts[0][0], py - pts[0][1]) : d;
}

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
    (l) => `<polyline points="${a.lines[l].points.map((p) => p.join(",")).join(" ")}" fill="none" stroke="white" stroke-width="${stroke}" stroke-dasharray="${stroke * 4},${stroke * 3}"/>`,
  ).join("");
  return Buffer.from(`<svg xmlns="http://www.w3.org/2000/svg" width="${a.width}" height="${a.height}">${lines}</svg>`);
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { out: { type: "string" }, model: { type: "string" } } });
  if (!existsSync(join(REAL, "annotations.json"))) {
    console.log(`eval-real: ${REAL} is absent; nothing to evaluate.`);
    return 0;
  }
  const annotations = JSON.parse(await readFile(join(REAL, "annotations.json"), "utf8")) as { images: Annotation[] };
  const analyzer = await createAnalyzer({ modelPath: values.model, workers: 1 });
  const rows: string[] = [];
  let localised = 0;
  let total = 0;
  try {
    console.log(`model ${analyzer.model}`);
    for (const a of annotations.images) {
      const bytes = await readFile(join(REAL, a.file));
      const t0 = performance.now();
      const result = await analyzer.analyze(bytes);
      const ms = performance.now() - t0;
      if (result.width !== a.width || result.height !== a.height) {
        console.warn(`${a.file}: engine size ${result.width}x${result.height} differs from the annotation's ${a.width}x${a.height}`);
      }
      for (const line of LINE_NAMES) {
        const { data } = await sharp(result.masks[line]).toColourspace("b-w").raw().toBuffer({ resolveWithObject: true });
        const s = scoreLine(data, result.width, result.height, a.lines[line].points, a.palm_width_px, result.stats[line].detected);
        total++;
        if (s.localised) localised++;
        rows.push(
          [
            a.file.padEnd(14),
            line.padEnd(6),
            a.lines[line].confidence.padEnd(7),
            (s.detected ? "yes" : "no").padEnd(9),
            String(s.pixels).padStart(8),
            (Number.isFinite(s.meanDist) ? `${(100 * s.meanDist).toFixed(1)}%` : "-").padStart(10),
            `${(100 * s.coverage).toFixed(1)}%`.padStart(9),
            s.localised ? "LOCALISED" : "-",
            line === "heart" ? `(${Math.round(ms)} ms)` : "",
          ].join(" "),
        );
      }
      if (values.out) {
        await mkdir(values.out, { recursive: true });
        await sharp(result.overlay)
          .composite([{ input: annotationSvg(a) }])
          .jpeg({ quality: 85 })
          .toFile(join(values.out, a.file.replace(/\.[^.]+$/, "") + ".overlay.jpg"));
      }
    }
  } finally {
    await analyzer.close();
  }
  console.log(
    ["image".padEnd(14), "line".padEnd(6), "annot".padEnd(7), "detected".padEnd(9), "pixels".padStart(8), "mean dist".padStart(10), "coverage".padStart(9), "localised"].join(" "),
  );
  for (const r of rows) console.log(r);
  console.log(`\n${localised}/${total} localised (mean distance <= ${MAX_DIST * 100}% of palm width, coverage >= ${MIN_COVERAGE * 100}%)`);
  if (values.out) await writeFile(join(values.out, "eval-real.txt"), `${rows.join("\n")}\n${localised}/${total} localised\n`);
  return 0;
}

main().then(
  (code) => (process.exitCode = code),
  (e: unknown) => {
    console.error(e instanceof Error ? e.message : e);
    process.exitCode = 1;
  },
);
