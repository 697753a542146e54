/**
 * The shared annotated real palm photos (`<repo>/../shared/real-palms/`, read there, never copied
 * into the repository), as eval:real and the real-photo tests read them.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { LineName } from "../src/inference/analyzer-types.js";

export const REAL_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../shared/real-palms");

type Point = [number, number];

/** RealAnnotation is one photo of annotations.json (the folder's README defines the fields). */
export interface RealAnnotation {
  file: string;
  width: number;
  height: number;
  palm_width_px: number;
  palm_polygon: Point[];
  /** A line not visible at all is left out. */
  lines: Partial<Record<LineName, { points: Point[]; confidence: string }>>;
}

/** readRealAnnotations returns the photos of annotations.json, or [] where the folder is absent. */
export function readRealAnnotations(): RealAnnotation[] {
  const file = join(REAL_DIR, "annotations.json");
  if (!existsSync(file)) return [];
  return (JSON.parse(readFileSync(file, "utf8")) as { images: RealAnnotation[] }).images;
}

/**
 * trueHandedness reads which hand a palm is from its annotation: with y down, a right palm has
 * its radial side (where the head line starts) to the right of its ulnar side (where the heart
 * line starts) when seen with the wrist (the life line's end) down: a positive cross product.
 * Without the three lines, the palm outline cannot say: undefined.
 */
export function trueHandedness(lines: RealAnnotation["lines"]): "left" | "right" | undefined {
  if (!lines.heart || !lines.head || !lines.life) return undefined;
  const ulnar = lines.heart.points[0];
  const radial = lines.head.points[0];
  const hp = lines.heart.points;
  const mid: Point = [hp.reduce((s, p) => s + p[0], 0) / hp.length, hp.reduce((s, p) => s + p[1], 0) / hp.length];
  const wrist = lines.life.points[lines.life.points.length - 1];
  const across: Point = [radial[0] - ulnar[0], radial[1] - ulnar[1]];
  const down: Point = [wrist[0] - mid[0], wrist[1] - mid[1]];
  return across[0] * down[1] - across[1] * down[0] > 0 ? "right" : "left";
}

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

/** polylineDistance: from (px, py) to the nearest point of the polyline `pts`. */
export function polylineDistance(px: number, py: number, pts: Point[]): number {
  let d = Infinity;
  for (let i = 1; i < pts.length; i++) d = Math.min(d, segmentDistance(px, py, pts[i - 1], pts[i]));
  return pts.length === 1 ? Math.hypot(px - pts[0][0], py - pts[0][1]) : d;
}
