/**
 * Line geometry: a detected line's course as a polyline and its length, from the kept mask at
 * model resolution in the canonical palm frame (every hand upright and seen as a right palm).
 */
import type { LineName } from "./analyzer-types.js";

/** ModelPoint is a model-pixel position (u, v) in the canonical frame. */
export type ModelPoint = [number, number];

/** MAX_POLYLINE_POINTS bounds a line's polyline. */
export const MAX_POLYLINE_POINTS = 24;

/**
 * thin reduces a binary S x S mask to a one-pixel-wide skeleton (Zhang-Suen), returned as a new 0/1 array.
 */
export function thin(mask: Uint8Array, size: number): Uint8Array {
  const m = Uint8Array.from(mask, (v) => (v ? 1 : 0));
  const at = (u: number, v: number) => (u >= 0 && v >= 0 && u < size && v < size ? m[v * size + u] : 0);
  const del: number[] = [];
  let changed = true;
  while (changed) {
    changed = false;
    for (let pass = 0; pass < 2; pass++) {
      del.length = 0;
      for (let v = 0; v < size; v++) {
        for (let u = 0; u < size; u++) {
          if (!m[v * size + u]) continue;
          // Neighbours P2..P9 clockwise from north.
          const p = [at(u, v - 1), at(u + 1, v - 1), at(u + 1, v), at(u + 1, v + 1), at(u, v + 1), at(u - 1, v + 1), at(u - 1, v), at(u - 1, v - 1)];
          const b = p.reduce((s, x) => s + x, 0);
          if (b < 2 || b > 6) continue;
          let a = 0;
          for (let i = 0; i < 8; i++) if (!p[i] && p[(i + 1) % 8]) a++;
          if (a !== 1) continue;
          if (pass === 0 ? p[0] * p[2] * p[4] || p[2] * p[4] * p[6] : p[0] * p[2] * p[6] || p[0] * p[4] * p[6]) continue;
          del.push(v * size + u);
        }
      }
      for (const i of del) m[i] = 0;
      if (del.length) changed = true;
    }
  }
  return m;
}

/** Geodesic distances (8-connected, diagonal steps cost sqrt 2) from `from` over one skeleton component. */
function walk(skel: Uint8Array, size: number, from: number): { dist: Map<number, number>; back: Map<number, number> } {
  const dist = new Map<number, number>([[from, 0]]);
  const back = new Map<number, number>();
  // A skeleton component is a few hundred pixels at most: a linear scan for the nearest is enough.
  const queue: number[] = [from];
  while (queue.length) {
    let best = 0;
    for (let i = 1; i < queue.length; i++) if (dist.get(queue[i])! < dist.get(queue[best])!) best = i;
    const cur = queue.splice(best, 1)[0];
    const cu = cur % size;
    const cv = (cur - cu) / size;
    for (let dv = -1; dv <= 1; dv++) {
      for (let du = -1; du <= 1; du++) {
        const u = cu + du;
        const v = cv + dv;
        if ((!du && !dv) || u < 0 || v < 0 || u >= size || v >= size || !skel[v * size + u]) continue;
        const j = v * size + u;
        const d = dist.get(cur)! + (du && dv ? Math.SQRT2 : 1);
        if (d < (dist.get(j) ?? Infinity)) {
          if (!dist.has(j)) queue.push(j);
          dist.set(j, d);
          back.set(j, cur);
        }
      }
    }
  }
  return { dist, back };
}

function farthest(dist: Map<number, number>, from: number): number {
  let end = from;
  for (const [j, d] of dist) if (d > dist.get(end)!) end = j;
  return end;
}

/** Longest geodesic path through the skeleton component of `start` (marked in `seen`). */
function componentDiameter(skel: Uint8Array, size: number, start: number, seen: Uint8Array): ModelPoint[] {
  const first = walk(skel, size, start);
  for (const j of first.dist.keys()) seen[j] = 1;
  const a = farthest(first.dist, start);
  const second = walk(skel, size, a);
  const path: ModelPoint[] = [];
  for (let j: number | undefined = farthest(second.dist, a); j !== undefined; j = second.back.get(j)) {
    path.push([j % size, Math.floor(j / size)]);
  }
  return path;
}

function pathLength(path: readonly ModelPoint[]): number {
  let len = 0;
  for (let i = 1; i < path.length; i++) len += Math.hypot(path[i][0] - path[i - 1][0], path[i][1] - path[i - 1][1]);
  return len;
}

/** Douglas-Peucker simplification with tolerance `eps` (model pixels). */
function simplify(path: readonly ModelPoint[], eps: number): ModelPoint[] {
  if (path.length < 3) return [...path];
  const keep = new Uint8Array(path.length);
  keep[0] = keep[path.length - 1] = 1;
  const stack: [number, number][] = [[0, path.length - 1]];
  while (stack.length) {
    const [a, b] = stack.pop()!;
    const [ax, ay] = path[a];
    const [bx, by] = path[b];
    const len = Math.hypot(bx - ax, by - ay) || 1;
    let worst = -1;
    let wd = eps;
    for (let i = a + 1; i < b; i++) {
      const d = Math.abs((bx - ax) * (ay - path[i][1]) - (ax - path[i][0]) * (by - ay)) / len;
      if (d > wd) {
        wd = d;
        worst = i;
      }
    }
    if (worst > 0) {
      keep[worst] = 1;
      stack.push([a, worst], [worst, b]);
    }
  }
  return path.filter((_, i) => keep[i]);
}

/**
 * linePath traces a kept line mask (S x S, canonical frame) as one ordered path: the longest path
 * through each skeleton piece, pieces joined end to end (nearest ends first, up to `maxGap` model
 * pixels apart), simplified to at most {@link MAX_POLYLINE_POINTS} points. Oriented as a palmist
 * reads the line: heart from the little-finger edge (small u), head from the thumb side (large u),
 * life from its start near the index (small v) toward the wrist. Empty when the mask is empty.
 * Pinned by test/unit/inference/line-geometry.spec.ts.
 */
export function linePath(kept: Uint8Array, size: number, line: LineName, maxGap = size * 0.12): ModelPoint[] {
  const skel = thin(kept, size);
  const seen = new Uint8Array(size * size);
  const pieces: ModelPoint[][] = [];
  for (let i = 0; i < skel.length; i++) {
    if (!skel[i] || seen[i]) continue;
    const p = componentDiameter(skel, size, i, seen);
    if (p.length) pieces.push(p);
  }
  if (!pieces.length) return [];
  pieces.sort((a, b) => pathLength(b) - pathLength(a));
  let path = pieces.shift()!;
  const dist = (a: ModelPoint, b: ModelPoint) => Math.hypot(a[0] - b[0], a[1] - b[1]);
  for (let joined = true; joined && pieces.length; ) {
    joined = false;
    let best = -1;
    let bestGap = maxGap;
    let how = 0;
    pieces.forEach((p, k) => {
      const ends = [dist(path[path.length - 1], p[0]), dist(path[path.length - 1], p[p.length - 1]), dist(path[0], p[p.length - 1]), dist(path[0], p[0])];
      ends.forEach((g, h) => {
        if (g <= bestGap) {
          bestGap = g;
          best = k;
          how = h;
        }
      });
    });
    if (best >= 0) {
      const p = pieces.splice(best, 1)[0];
      if (how === 0) path = [...path, ...p];
      else if (how === 1) path = [...path, ...[...p].reverse()];
      else if (how === 2) path = [...p, ...path];
      else path = [...[...p].reverse(), ...path];
      joined = true;
    }
  }
  const [s, e] = [path[0], path[path.length - 1]];
  const reverse = line === "heart" ? s[0] > e[0] : line === "head" ? s[0] < e[0] : s[1] > e[1];
  if (reverse) path.reverse();
  let eps = 0.75;
  let out = simplify(path, eps);
  while (out.length > MAX_POLYLINE_POINTS) out = simplify(path, (eps *= 1.5));
  return out;
}

/** polylineLength is the summed segment length of image-space points. */
export function polylineLength(points: readonly [number, number][]): number {
  return pathLength(points);
}
