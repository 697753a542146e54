import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import sharp from "sharp";
import { LINE_NAMES, type LineName } from "../src/inference/analyzer-types.js";
import { createAnalyzer } from "../src/inference/analyzer.js";
import { BOX_DIR, type Box, boundsOf, partOf, readBoxes } from "./box-set.js";
import { oneOf, scriptArgs } from "./cli.js";
import AGREEMENT from "./box-agreement.json" with { type: "json" };
import { TurnTally, turned90 } from "./trait-stability.js";

/** The agreement rule's constants, from the one table training/real_boxes.py reads too (./box-agreement.json). */
const { grow: GROW, min_grow_px: MIN_GROW_PX, min_inside: MIN_INSIDE, min_iou: MIN_IOU } = AGREEMENT;

/** grownBox is `box` grown as the agreement rule grows it: GROW of its diagonal on each side, at least MIN_GROW_PX. */
export function grownBox([x0, y0, x1, y1]: Box): Box {
  const g = Math.max(GROW * Math.hypot(x1 - x0, y1 - y0), MIN_GROW_PX);
  return [x0 - g, y0 - g, x1 + g, y1 + g];
}

/** agreement scores one mask (0/255 bytes, width x height) against its box. */
export function agreement(mask: Uint8Array, width: number, height: number, box: Box): { inside: number; iou: number; agrees: boolean } {
  const [x0, y0, x1, y1] = box;
  const [gx0, gy0, gx1, gy1] = grownBox(box);
  let n = 0;
  let inside = 0;
  let mx0 = Infinity;
  let my0 = Infinity;
  let mx1 = -Infinity;
  let my1 = -Infinity;
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      if (mask[y * width + x] < 128) continue;
      n++;
      if (x >= gx0 && x <= gx1 && y >= gy0 && y <= gy1) inside++;
      mx0 = Math.min(mx0, x);
      my0 = Math.min(my0, y);
      mx1 = Math.max(mx1, x + 1);
      my1 = Math.max(my1, y + 1);
    }
  }
  if (n === 0) return { inside: 0, iou: 0, agrees: false };
  const iw = Math.max(0, Math.min(x1, mx1) - Math.max(x0, mx0));
  const ih = Math.max(0, Math.min(y1, my1) - Math.max(y0, my0));
  const inter = iw * ih;
  const iou = inter / ((x1 - x0) * (y1 - y0) + (mx1 - mx0) * (my1 - my0) - inter);
  return { inside: inside / n, iou, agrees: inside / n >= MIN_INSIDE && iou >= MIN_IOU };
}

/** maskAgreement scores a line's mask PNG (an answer's `masks[line]`) against its box by {@link agreement}. */
export async function maskAgreement(png: Uint8Array, box: Box): Promise<ReturnType<typeof agreement>> {
  const { data, info } = await sharp(png).toColourspace("b-w").raw().toBuffer({ resolveWithObject: true });
  return agreement(data, info.width, info.height, box);
}

/** DEGRADES: what --degrade does to each photo before it is analysed, as a phone's worse photo would. */
const DEGRADES = {
  /** Underexposed: a third of the light, with sensor noise (SD 2 of 255, seeded), saved as JPEG q90. */
  dim: true,
  /** Saved again as JPEG at quality 15 (strong blocking, as a messaging app recompresses). */
  jpeg: true,
  /** Half the size (320 x 320 from the set's 640 x 640): a palm 80-200 px across. */
  small: true,
  /**
   * A close-up: the square around the lines' boxes grown by CLOSEUP_MARGIN of its side, so the palm
   * fills the frame and the fingers leave it, enlarged to 640 px (the photo a palmistry app gets most).
   */
  closeup: true,
  /**
   * A tight close-up: the same square grown by only TIGHT_MARGIN, so the frame ends near the palm's
   * own edges (the finger bases and the wrist crease at or past them), as a phone held close takes it.
   */
  tight: true,
} as const;
export type Degrade = keyof typeof DEGRADES;

/** SMALL: how --degrade small scales a photo. */
const SMALL = 0.5;

/** CLOSEUP_MARGIN: the close-up's square is the lines' boxes' larger side grown by this share on each side. */
const CLOSEUP_MARGIN = 0.25;
/** TIGHT_MARGIN: the same for a tight close-up. */
const TIGHT_MARGIN = 0.1;

/** Degraded is a worse photo and where a box of the original lies in it. */
export interface Degraded {
  bytes: Buffer;
  box: (box: Box) => Box;
}

/**
 * closeupSquare is a close-up's square around the bounds [x0, y0, x1, y1] of a palm's lines (see
 * DEGRADES.closeup): its centre and side; eval-real.ts cuts its close-ups by it too.
 */
export function closeupSquare([x0, y0, x1, y1]: Box, margin = CLOSEUP_MARGIN): { cx: number; cy: number; side: number } {
  return { cx: (x0 + x1) / 2, cy: (y0 + y1) / 2, side: Math.round(Math.max(x1 - x0, y1 - y0) * (1 + 2 * margin)) };
}

/** closeup crops `bytes` to the square around `boxes` grown by `margin` (see DEGRADES.closeup), black beyond the photo. */
async function closeup(bytes: Buffer, boxes: Box[], margin: number): Promise<Degraded> {
  if (boxes.length === 0) throw new RangeError("closeup: a close-up is cut around the lines' boxes; none given");
  const { cx, cy, side } = closeupSquare(boundsOf(boxes), margin);
  const left = Math.round(cx - side / 2);
  const top = Math.round(cy - side / 2);
  // Pad first so the square may run past the photo's edge (black there, as a letterbox).
  const pad = side;
  const padded = await sharp(bytes).extend({ top: pad, bottom: pad, left: pad, right: pad, background: "#000" }).png().toBuffer();
  const out = await sharp(padded)
    .extract({ left: left + pad, top: top + pad, width: side, height: side })
    .resize(640, 640)
    .jpeg({ quality: 90 })
    .toBuffer();
  const k = 640 / side;
  return { bytes: out, box: (b) => [(b[0] - left) * k, (b[1] - top) * k, (b[2] - left) * k, (b[3] - top) * k] };
}

/** degraded is the photo `bytes` as --degrade `kind` makes it; `boxes` are its lines' boxes (for closeup and tight). */
export async function degraded(bytes: Buffer, kind: Degrade, boxes: Box[] = []): Promise<Degraded> {
  const same = (box: Box) => box;
  if (kind === "closeup") return closeup(bytes, boxes, CLOSEUP_MARGIN);
  if (kind === "tight") return closeup(bytes, boxes, TIGHT_MARGIN);
  if (kind === "jpeg") return { bytes: await sharp(bytes).jpeg({ quality: 15 }).toBuffer(), box: same };
  if (kind === "small") {
    const { width = 0 } = await sharp(bytes).metadata();
    const out = await sharp(bytes)
      .resize(Math.round(width * SMALL))
      .jpeg({ quality: 90 })
      .toBuffer();
    return { bytes: out, box: (b) => b.map((v) => v * SMALL) as Box };
  }
  const { data, info } = await sharp(bytes).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  // A fixed-seed generator: the same noise on every run. Normal deviates by Box-Muller.
  let seed = 12345;
  const uniform = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return (seed + 0.5) / 2 ** 32;
  };
  for (let i = 0; i < data.length; i++) {
    const n = Math.sqrt(-2 * Math.log(uniform())) * Math.cos(2 * Math.PI * uniform());
    data[i] = Math.max(0, Math.min(255, Math.round(data[i] / 3 + 2 * n)));
  }
  return { bytes: await sharp(data, { raw: info }).jpeg({ quality: 90 }).toBuffer(), box: same };
}

type PerLine = Record<LineName, number>;

/** The widths of lineTable's columns after the line's name: agrees, drawn wrong, not detected, thickness. */
const TABLE_WIDTHS = [14, 12, 13, 10];

/** pct is a as a share of b, in percent with one decimal. */
const pct = (a: number, b: number) => `${((100 * a) / Math.max(1, b)).toFixed(1)}%`;

/**
 * lineTable is eval:boxes' table: per line the masks that agree with their boxes, those drawn wrong, those not
 * detected and the median thickness, then the three lines together (`lines`), the sums a release rule reads.
 * Pinned by test/unit/cli/scripts.spec.ts ("eval:boxes' table").
 */
export function lineTable(agree: PerLine, wrong: PerLine, total: PerLine, thickness: Record<LineName, number[]>): string[] {
  const row = (name: string, ...cells: string[]) => [name.padEnd(6), ...cells.map((c, i) => c.padStart(TABLE_WIDTHS[i]))].join(" ");
  const counts = (name: string, a: number, w: number, n: number, median: string) =>
    row(name, `${a}/${n} ${pct(a, n)}`, String(w), String(n - a - w), median);
  const sum = (v: PerLine) => LINE_NAMES.reduce((s, line) => s + v[line], 0);
  const rows = [row("line", "agrees", "drawn wrong", "not detected", "thickness")];
  for (const line of LINE_NAMES) {
    const t = [...thickness[line]].sort((a, b) => a - b);
    rows.push(counts(line, agree[line], wrong[line], total[line], t.length ? `${(100 * t[Math.floor(t.length / 2)]).toFixed(1)}%` : "-"));
  }
  rows.push(counts("lines", sum(agree), sum(wrong), sum(total), "-"));
  return rows;
}

const USAGE = `usage: npm run eval:boxes [-- --part eval|heldout|train] [--model FILE] [--detail] [--turned] [--degrade KIND[+KIND] [--versus]]
  Scores the engine on a part of the box set (${BOX_DIR}; the evaluation quarter unless --part):
  the palm found, and per line and for the three together how many masks agree with their boxes, are drawn wrong,
  or are not detected and why.
  --detail      one line per photo
  --turned      each photo read again turned by 90 degrees: how many lines' traits move
  --degrade     each photo made worse first: ${Object.keys(DEGRADES).join(", ")}, or several joined by +
  --versus      with --degrade, each photo read as is too: how many lines' traits move between the two readings`;

async function main(): Promise<number> {
  const args = scriptArgs(USAGE, {
    options: {
      part: { type: "string", default: "eval" },
      model: { type: "string" },
      detail: { type: "boolean" },
      turned: { type: "boolean" },
      degrade: { type: "string" },
      versus: { type: "boolean" },
    },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  if (!oneOf("--part", values.part, ["eval", "heldout", "train"], USAGE)) return 2;
  // --degrade closeup+dim: each in turn, the boxes moved with the photo.
  const degrade = values.degrade;
  const steps = (degrade?.split("+") ?? []) as Degrade[];
  if (steps.some((kind) => !(kind in DEGRADES))) {
    console.error(`eval-boxes: --degrade is one of ${Object.keys(DEGRADES).join(", ")}, or several joined by +`);
    return 2;
  }
  if (values.versus && steps.length === 0) {
    console.error(`--versus compares a degraded photo with the photo as is: give --degrade too\n${USAGE}`);
    return 2;
  }
  if (!existsSync(join(BOX_DIR, "boxes.csv"))) {
    console.log(`eval-boxes: ${BOX_DIR} is absent; nothing to evaluate.`);
    return 0;
  }
  const boxes = new Map([...readBoxes()].filter(([file]) => partOf(file) === values.part));
  const analyzer = await createAnalyzer({ modelPath: values.model, workers: 1 });
  const files = [...boxes.keys()].sort();
  let palms = 0;
  let fingersOut = 0;
  let backs = 0;
  let ms = 0;
  const agree: PerLine = { heart: 0, head: 0, life: 0 };
  const total: PerLine = { heart: 0, head: 0, life: 0 };
  const wrong: PerLine = { heart: 0, head: 0, life: 0 };
  const why = new Map<string, number>();
  // A blob that fills its box agrees with it: the median thickness (mask pixels over the course's
  // length, in palm widths) shows one (models/palm-lines/MODEL_CARD.md, "A first try that failed").
  const thickness = { heart: [], head: [], life: [] } as Record<LineName, number[]>;
  // --turned: each photo read again turned by 90 degrees; no labels needed, so any part can be used.
  const turn = new TurnTally();
  // --versus: a worse photo's traits against the photo's own, with the turned photo's bounds.
  const versus = new TurnTally();
  try {
    console.log(`model ${analyzer.model}; box set part '${values.part}', ${files.length} photos${degrade ? `, degraded: ${degrade}` : ""}`);
    for (const file of files) {
      const t0 = performance.now();
      const read = await readFile(join(BOX_DIR, "images", file));
      const lineBoxes = LINE_NAMES.map((line) => boxes.get(file)![line]).filter((b): b is Box => b !== undefined);
      // placed: where a box of the photo read lies in the photo analysed, through every step.
      let bytes: Buffer = read;
      let placed = (box: Box) => box;
      for (const kind of steps) {
        const step = await degraded(bytes, kind, lineBoxes.map(placed));
        const before = placed;
        bytes = step.bytes;
        placed = (box) => step.box(before(box));
      }
      const result = await analyzer.analyze(bytes);
      ms += performance.now() - t0;
      const turned = values.turned ? await analyzer.analyze(await turned90(bytes)) : undefined;
      const asIs = values.versus ? await analyzer.analyze(read) : undefined;
      // "palm found" counts a hand read as its back too (as the model card's history does); backs says how many.
      if (result.reason !== "no_hand") palms++;
      if (result.reason === "back_of_hand") backs++;
      if (result.hand && !result.hand.shape.fingersInPhoto) fingersOut++;
      const row: string[] = [];
      for (const line of LINE_NAMES) {
        if (turned) {
          const moved = turn.add(result.stats[line].traits, turned.stats[line].traits);
          if (moved.length > 0) row.push(`${line} turned: ${moved.join(", ")}`);
        }
        if (asIs) {
          const moved = versus.add(asIs.stats[line].traits, result.stats[line].traits);
          if (moved.length > 0) row.push(`${line} versus as is: ${moved.join(", ")}`);
        }
        const given = boxes.get(file)![line];
        if (!given) continue;
        const box = placed(given);
        total[line]++;
        const stats = result.stats[line];
        if (!stats.detected) {
          const reason = result.reason || stats.reason || "not_detected";
          why.set(`${line} ${reason}`, (why.get(`${line} ${reason}`) ?? 0) + 1);
          row.push(`${line} - (${reason})`);
          continue;
        }
        const s = await maskAgreement(result.masks[line], box);
        if (s.agrees) agree[line]++;
        else wrong[line]++;
        const palmWidth = result.hand?.palmWidth ?? 0;
        if (palmWidth > 0 && stats.length > 0) thickness[line].push(stats.pixels / (stats.length * palmWidth) / palmWidth);
        row.push(
          `${line} ${s.agrees ? "AGREES" : "WRONG"} in ${(100 * s.inside).toFixed(0)}% iou ${s.iou.toFixed(2)} conf ${stats.confidence.toFixed(3)} len ${stats.length.toFixed(2)}`,
        );
      }
      if (values.detail) console.log(`${file.padEnd(28)} ${result.reason || "lines"}; ${row.join("; ")}`);
    }
  } finally {
    await analyzer.close();
  }
  console.log(
    `\npalm found: ${palms}/${files.length} (${pct(palms, files.length)}), ${backs} of them read as the back of a hand; mean engine time ${Math.round(ms / Math.max(1, files.length))} ms`,
  );
  console.log(`hands whose fingertips lie outside the photo (finger values estimated): ${fingersOut}`);
  for (const row of lineTable(agree, wrong, total, thickness)) console.log(row);
  console.log("thickness: the median of the drawn lines' mask pixels over course length, in % of the palm width");
  if (values.turned) console.log(`turned 90 degrees: ${turn.summary()}`);
  if (values.versus) console.log(`${degrade} against as is: ${versus.summary()}`);
  console.log("not detected, by reason:");
  for (const [k, n] of [...why.entries()].sort()) console.log(`  ${k}: ${n}`);
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
