/**
 * Line traits: what a palmistry app reads off a detected line, measured on its course in the
 * canonical palm frame (model pixels, every hand upright and seen as a right palm) and reported
 * in palm widths, fractions and image pixels. The scales that turn numbers into words are
 * docs/api.md's "Line traits"; pinned by test/unit/inference/line-traits.spec.ts.
 */
import type { TensorSpec } from "../image/preprocess.js";
import type { Point } from "../landmarks/geometry.js";
import { frameToImage, INDEX_MCP, MIDDLE_MCP, PINKY_MCP, WRIST, type PalmFrame } from "../landmarks/palm-frame.js";
import type { HeadLifeStart, LineEnd, LineName, LineTraits } from "./analyzer-types.js";
import { type LineCourse, lineCourse, polylineLength, type ModelPoint } from "./line-geometry.js";

/** LENGTH_SCALE: per line, [short below, long from] in palm widths (LineStats.length). */
export const LENGTH_SCALE: Record<LineName, readonly [number, number]> = { heart: [0.7, 1.0], head: [0.7, 1.0], life: [0.8, 1.2] };
/** CURVATURE_SCALE: [straight below, strongly curved from] (sagitta over chord). */
export const CURVATURE_SCALE = [0.05, 0.15] as const;
/**
 * DEPTH_SCALE: [faint below, deep from] (1 - crease / skin brightness): the thirds of the lines
 * drawn on the box set's training part (palm-lines 3.3.0: 0.22 and 0.31), so each word reads on
 * about a third of real lines; `node --import tsx scripts/trait-scales.ts` measures them again.
 */
export const DEPTH_SCALE = [0.22, 0.31] as const;
/**
 * Crease depth's samples across the course: the crease within CREASE_REACH of it, the skin at SKIN_OFFSETS on both
 * sides, in pixels of a DEPTH_VIEW px view framed at FRAME_SIDE (3.3.0's, where they were chosen); other views and
 * frames scale them by ruleUnit / DEPTH_VIEW, so they span the same share of the palm (exactly 1 for 3.3.0).
 */
const CREASE_REACH = 1.5;
const SKIN_OFFSETS = [3, 4, 5] as const;
const DEPTH_VIEW = 256;
/** The course's direction at a point: from this many points before it to as many after. */
const TANGENT_STEPS = 3;
/** JOINED_GAP: head and life start joined when their first quarters come this close (palm widths). */
export const JOINED_GAP = 0.05;
/** A gap along the course counts as a break from this length (palm widths; at least 2 model pixels). */
export const MIN_BREAK = 0.03;
/** A side branch counts as a fork from this reach (palm widths; at least 4 model pixels)... */
export const MIN_FORK = 0.08;
/** ... when it leaves the course within this fraction of the course's length from an end. */
export const FORK_ZONE = 0.3;
/** An end lies in the "wrist" zone from this far down the palm (0 knuckle line, 1 wrist). */
export const WRIST_ZONE = 0.8;

const RING_MCP = 13;
const round = (x: number, decimals: number) => Math.round(x * 10 ** decimals) / 10 ** decimals;
const dist = (a: ModelPoint, b: ModelPoint) => Math.hypot(a[0] - b[0], a[1] - b[1]);

/**
 * frameLuma recovers the brightness (Rec. 601 luma, 0..255) of each model pixel from the line
 * model's input tensor (planar, normalised as `spec` says).
 */
export function frameLuma(tensor: Float32Array, spec: TensorSpec): Float32Array {
  const n = spec.inputSize * spec.inputSize;
  const { scale, mean, std } = spec.normalization;
  const out = new Float32Array(n);
  const weight = spec.channelOrder === "RGB" ? [0.299, 0.587, 0.114] : [0.114, 0.587, 0.299];
  for (let c = 0; c < 3; c++) {
    const a = std[c] * scale * weight[c];
    const b = mean[c] * scale * weight[c];
    const base = c * n;
    for (let i = 0; i < n; i++) out[i] += tensor[base + i] * a + b;
  }
  return out;
}

/**
 * placeOnPalm places an image point relative to the landmarks: `across` 0 at the little-finger
 * knuckle (17) and 1 at the index knuckle (5); `along` 0 on the line through them and 1 at the
 * wrist (0); `zone` the finger whose base it lies under (split halfway between neighbouring
 * knuckles, the index's zone reaching as far past its knuckle), "thumb_side" beyond that,
 * "wrist" from {@link WRIST_ZONE} down. Mirror-free: it only uses the landmarks.
 */
export function placeOnPalm(point: Point, landmarks: readonly Point[]): LineEnd {
  const o = landmarks[PINKY_MCP];
  const ax: Point = [landmarks[INDEX_MCP][0] - o[0], landmarks[INDEX_MCP][1] - o[1]];
  const span2 = ax[0] * ax[0] + ax[1] * ax[1] || 1;
  const across = (p: Point) => ((p[0] - o[0]) * ax[0] + (p[1] - o[1]) * ax[1]) / span2;
  // Signed distance from the knuckle line, positive on the wrist's side.
  const off = (p: Point) => ((p[0] - o[0]) * ax[1] - (p[1] - o[1]) * ax[0]) / Math.sqrt(span2);
  const wrist = off(landmarks[WRIST]) || 1;
  const a = across(point);
  const along = off(point) / wrist;
  const a13 = across(landmarks[RING_MCP]);
  const a9 = across(landmarks[MIDDLE_MCP]);
  let zone: LineEnd["zone"];
  if (along >= WRIST_ZONE) zone = "wrist";
  else if (a < a13 / 2) zone = "little";
  else if (a < (a13 + a9) / 2) zone = "ring";
  else if (a < (a9 + 1) / 2) zone = "middle";
  else if (a < 1 + (1 - a9) / 2) zone = "index";
  else zone = "thumb_side";
  return { point: [round(point[0], 1), round(point[1], 1)], across: round(a, 3), along: round(along, 3), zone };
}

function label<T extends string>(value: number, [low, high]: readonly [number, number], words: readonly [T, T, T]): T {
  return value < low ? words[0] : value < high ? words[1] : words[2];
}

/** MeasureContext is what every line of one image shares. */
export interface MeasureContext {
  /** Model input side S. */
  size: number;
  frame: PalmFrame;
  /** The 21 landmarks, image pixels. */
  landmarks: readonly Point[];
  /** Hand.palm_width as the answer gives it (image pixels): the unit of lengths. */
  palmWidth: number;
  /** {@link frameLuma} of the image's palm view. */
  luma: Float32Array;
  /** postprocess.ts ruleUnit of the view and the model's frame (size when omitted): crease depth's samples follow it. */
  ruleUnit?: number;
}

/** A measured line: its traits and its course (model pixels, reading order). */
export interface MeasuredLine {
  traits: LineTraits;
  course: ModelPoint[];
}

/**
 * measureLine measures one detected line from its kept mask (S x S, canonical frame) and its
 * LineStats.length (palm widths); `traced` is the mask's {@link lineCourse} where the caller has
 * it. Curvature: the course's largest distance from its chord over the chord. Depth: see
 * {@link creaseDepth}. Breaks: the joins of the course's pieces, measured outside the mask, from
 * {@link MIN_BREAK}. Forks: skeleton branches off the course reaching {@link MIN_FORK} from where
 * they leave it, within {@link FORK_ZONE} of an end; the longest per end.
 */
export function measureLine(line: LineName, kept: Uint8Array, length: number, ctx: MeasureContext, traced?: LineCourse): MeasuredLine {
  const { size: S, frame, landmarks } = ctx;
  const unit = Math.max(1e-6, (ctx.palmWidth * S) / frame.side); // model pixels per palm width
  const toImage = (p: ModelPoint) => frameToImage(frame, S, p[0], p[1]);
  const { path, skeleton } = traced ?? lineCourse(kept, S, line);
  const n = path.length;
  const cum = new Float64Array(n);
  for (let i = 1; i < n; i++) cum[i] = cum[i - 1] + dist(path[i - 1], path[i]);
  const total = n > 1 ? cum[n - 1] : 0;

  // Curvature: sagitta over chord.
  let curvature = 0;
  if (n > 2) {
    const [s, e] = [path[0], path[n - 1]];
    const chord = Math.max(1, dist(s, e));
    let sagitta = 0;
    for (const p of path) sagitta = Math.max(sagitta, Math.abs((e[0] - s[0]) * (s[1] - p[1]) - (s[0] - p[0]) * (e[1] - s[1])) / chord);
    curvature = sagitta / chord;
  }

  const breaks = lineBreaks(path, cum, kept, S, unit, toImage);

  // Forks: skeleton branches off the course near its ends.
  const onCourse = new Uint8Array(S * S);
  for (const [u, v] of path) onCourse[v * S + u] = 1;
  const visited = new Uint8Array(S * S);
  const best: Partial<Record<"start" | "end", { reach: number; at: ModelPoint }>> = {};
  const minFork = Math.max(4, MIN_FORK * unit);
  const stack: number[] = [];
  const around = new Int32Array(8);
  const next = new Int32Array(8);
  for (let i = 0; i < n && total > 0; i++) {
    const pos = cum[i] / total;
    const near = pos <= FORK_ZONE ? "start" : pos >= 1 - FORK_ZONE ? "end" : null;
    if (!near) continue;
    const [cu, cv] = path[i];
    let reach = 0;
    const nj = neighbours(cu, cv, S, around);
    for (let x = 0; x < nj; x++) {
      const j = around[x];
      if (!skeleton[j] || onCourse[j] || visited[j]) continue;
      visited[j] = 1;
      stack.push(j);
      while (stack.length) {
        const k = stack.pop()!;
        const ku = k % S;
        const kv = (k - ku) / S;
        reach = Math.max(reach, Math.hypot(ku - cu, kv - cv));
        const nm = neighbours(ku, kv, S, next);
        for (let y = 0; y < nm; y++) {
          const m = next[y];
          if (skeleton[m] && !onCourse[m] && !visited[m]) {
            visited[m] = 1;
            stack.push(m);
          }
        }
      }
    }
    if (reach >= minFork && reach > (best[near]?.reach ?? 0)) best[near] = { reach, at: path[i] };
  }
  const forks: LineTraits["forks"] = [];
  for (const near of ["start", "end"] as const) {
    const f = best[near];
    if (!f) continue;
    const p = toImage(f.at);
    forks.push({ near, length: round(f.reach / unit, 3), point: [round(p[0], 1), round(p[1], 1)] });
  }

  const depth = creaseDepth(path, ctx.luma, S, (ctx.ruleUnit ?? S) / DEPTH_VIEW);
  const traits: LineTraits = {
    length: label(length, LENGTH_SCALE[line], ["short", "medium", "long"]),
    curvature: round(curvature, 3),
    curvatureLabel: label(curvature, CURVATURE_SCALE, ["straight", "curved", "strongly_curved"]),
    depth: round(depth, 3),
    depthLabel: label(depth, DEPTH_SCALE, ["faint", "medium", "deep"]),
    breaks,
    forks,
    start: placeOnPalm(n ? toImage(path[0]) : [0, 0], landmarks),
    end: placeOnPalm(n ? toImage(path[n - 1]) : [0, 0], landmarks),
  };
  return { traits, course: path };
}

/**
 * lineBreaks finds the joins between the course's pieces where the straight step between them
 * leaves the mask for at least {@link MIN_BREAK} palm widths (2 model pixels at least); `cum` is
 * the course's cumulative length, `unit` model pixels per palm width.
 */
function lineBreaks(
  path: ModelPoint[],
  cum: Float64Array,
  kept: Uint8Array,
  S: number,
  unit: number,
  toImage: (p: ModelPoint) => Point,
): LineTraits["breaks"] {
  const n = path.length;
  const total = n > 1 ? cum[n - 1] : 0;
  const breaks: LineTraits["breaks"] = [];
  for (let i = 1; i < n; i++) {
    const step = cum[i] - cum[i - 1];
    if (step <= 1.5) continue;
    const [a, b] = [path[i - 1], path[i]];
    const samples = Math.ceil(step * 4);
    let out = 0;
    let first = -1; // where the step leaves the mask: the gap's start
    for (let k = 0; k < samples; k++) {
      const t = (k + 0.5) / samples;
      const u = Math.round(a[0] + (b[0] - a[0]) * t);
      const v = Math.round(a[1] + (b[1] - a[1]) * t);
      if (kept[v * S + u]) continue;
      out++;
      if (first < 0) first = k / samples;
    }
    const gap = (out / samples) * step;
    if (gap < Math.max(2, MIN_BREAK * unit)) continue;
    const mid = toImage([(a[0] + b[0]) / 2, (a[1] + b[1]) / 2]);
    const at = (cum[i - 1] + first * step) / total;
    breaks.push({ at: round(at, 3), length: round(gap / unit, 3), point: [round(mid[0], 1), round(mid[1], 1)] });
  }
  return breaks;
}

/** neighbours writes the 8-neighbours of (u, v) inside the S x S view into `out` and returns their count. */
function neighbours(u: number, v: number, S: number, out: Int32Array): number {
  let n = 0;
  for (let dv = -1; dv <= 1; dv++) {
    const vv = v + dv;
    if (vv < 0 || vv >= S) continue;
    for (let du = -1; du <= 1; du++) {
      const uu = u + du;
      if ((du || dv) && uu >= 0 && uu < S) out[n++] = vv * S + uu;
    }
  }
  return n;
}

function median(values: number[]): number {
  if (!values.length) return 0;
  values.sort((a, b) => a - b);
  const m = values.length >> 1;
  return values.length % 2 ? values[m] : (values[m - 1] + values[m]) / 2;
}

/**
 * creaseDepth: the median over the course of 1 - crease / skin, where at each course point the
 * crease is the darkest of the view sampled (bilinearly) across the course within
 * {@link CREASE_REACH}, and the skin the median of the samples at {@link SKIN_OFFSETS} on both
 * sides; floored at 0. Read across the course at fixed distances, it does not depend on how wide
 * the model drew the mask (line-traits.spec.ts, "whatever the mask's width"); on real photos
 * turned by 90 degrees half as many lines move by over 0.02 as with the skin read beside the mask
 * (docs/decisions/crease-depth.md).
 * Pixels reading as black (the view's pad outside the photo) are left out. `scale` stretches the sampling distances
 * with the palm (line-traits.spec.ts, "reads a crease in a tighter frame as in 3.3.0's").
 */
function creaseDepth(path: readonly ModelPoint[], luma: Float32Array, S: number, scale: number): number {
  const depths: number[] = [];
  const skin: number[] = [];
  for (let i = 0; i < path.length; i++) {
    const a = path[Math.max(0, i - TANGENT_STEPS)];
    const b = path[Math.min(path.length - 1, i + TANGENT_STEPS)];
    const len = Math.hypot(b[0] - a[0], b[1] - a[1]);
    if (len < 1) continue;
    const [nu, nv] = [-(b[1] - a[1]) / len, (b[0] - a[0]) / len];
    const [u, v] = path[i];
    let crease = Number.POSITIVE_INFINITY;
    for (let t = -CREASE_REACH; t <= CREASE_REACH; t += 0.5)
      crease = Math.min(crease, viewAt(luma, S, u + t * scale * nu, v + t * scale * nv));
    skin.length = 0;
    for (const t of SKIN_OFFSETS) {
      for (const side of [-1, 1]) {
        const x = viewAt(luma, S, u + side * t * scale * nu, v + side * t * scale * nv);
        if (x > 1) skin.push(x);
      }
    }
    if (crease <= 1 || skin.length < 4) continue;
    depths.push(Math.max(0, 1 - crease / median(skin)));
  }
  return median(depths);
}

/** viewAt samples the S x S view bilinearly at (x, y) (pixel centres at integers); 0 outside it. */
function viewAt(luma: Float32Array, S: number, x: number, y: number): number {
  const u = Math.floor(x);
  const v = Math.floor(y);
  if (u < 0 || v < 0 || u + 1 >= S || v + 1 >= S) return 0;
  const [fu, fv] = [x - u, y - v];
  const i = v * S + u;
  const top = luma[i] + (luma[i + 1] - luma[i]) * fu;
  const bottom = luma[i + S] + (luma[i + S + 1] - luma[i + S]) * fu;
  return top + (bottom - top) * fv;
}

/**
 * headLifeStart: the closest distance between the first quarters (by length) of the head's and
 * the life line's courses, in palm widths; joined at most {@link JOINED_GAP}.
 */
export function headLifeStart(head: readonly ModelPoint[], life: readonly ModelPoint[], unit: number): HeadLifeStart {
  const quarter = (path: readonly ModelPoint[]) => {
    let len = 0;
    for (let i = 1; i < path.length; i++) len += dist(path[i - 1], path[i]);
    const out: ModelPoint[] = path.length ? [path[0]] : [];
    for (let i = 1, acc = 0; i < path.length; i++) {
      acc += dist(path[i - 1], path[i]);
      if (acc > len / 4) break;
      out.push(path[i]);
    }
    return out;
  };
  let gap = Number.POSITIVE_INFINITY;
  const lq = quarter(life);
  for (const a of quarter(head)) for (const b of lq) gap = Math.min(gap, dist(a, b));
  const g = Number.isFinite(gap) ? gap / Math.max(unit, 1e-6) : 0;
  return { joined: g <= JOINED_GAP, gap: round(g, 3) };
}

/**
 * measureLines measures the reported lines of one image (their kept masks, and their polylines
 * in image pixels for LineStats.length, rounded as the answer rounds it) and, when head and life
 * both are, whether they start joined.
 */
export function measureLines(
  lines: readonly { line: LineName; kept: Uint8Array; traced?: LineCourse }[],
  polylines: Partial<Record<LineName, readonly Point[]>>,
  ctx: MeasureContext,
): { traits: Partial<Record<LineName, LineTraits>>; headLifeStart?: HeadLifeStart } {
  const traits: Partial<Record<LineName, LineTraits>> = {};
  const courses: Partial<Record<LineName, ModelPoint[]>> = {};
  for (const { line, kept, traced } of lines) {
    const length = ctx.palmWidth > 0 ? round(polylineLength(polylines[line] ?? []) / ctx.palmWidth, 3) : 0;
    const m = measureLine(line, kept, length, ctx, traced);
    traits[line] = m.traits;
    courses[line] = m.course;
  }
  const unit = (ctx.palmWidth * ctx.size) / ctx.frame.side;
  return {
    traits,
    headLifeStart: courses.head?.length && courses.life?.length ? headLifeStart(courses.head, courses.life, unit) : undefined,
  };
}
