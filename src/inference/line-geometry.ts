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
  // Zero-bordered copy (pixel (u, v) at (v + 1) * P + u + 1), so neighbours need no bounds checks;
  // only the set pixels are visited, and those deleted leave the list.
  const P = size + 2;
  const m = new Uint8Array(P * P);
  let alive: number[] = [];
  for (let v = 0; v < size; v++) {
    for (let u = 0; u < size; u++) {
      if (!mask[v * size + u]) continue;
      const i = (v + 1) * P + u + 1;
      m[i] = 1;
      alive.push(i);
    }
  }
  // Neighbours P2..P9 clockwise from north.
  const off = [-P, -P + 1, 1, P + 1, P, P - 1, -1, -P - 1];
  const p = new Uint8Array(8);
  const del: number[] = [];
  for (let changed = alive.length > 0; changed; ) {
    changed = false;
    for (let pass = 0; pass < 2; pass++) {
      del.length = 0;
      for (const i of alive) {
        let b = 0;
        for (let k = 0; k < 8; k++) b += p[k] = m[i + off[k]];
        if (b < 2 || b > 6) continue;
        let a = 0;
        for (let k = 0; k < 8; k++) if (!p[k] && p[(k + 1) & 7]) a++;
        if (a !== 1) continue;
        if (pass === 0 ? p[0] * p[2] * p[4] || p[2] * p[4] * p[6] : p[0] * p[2] * p[6] || p[0] * p[4] * p[6]) continue;
        del.push(i);
      }
      for (const i of del) m[i] = 0;
      if (del.length) {
        changed = true;
        alive = alive.filter((i) => m[i]);
      }
    }
  }
  const out = new Uint8Array(size * size);
  for (const i of alive) out[(Math.floor(i / P) - 1) * size + (i % P) - 1] = 1;
  return out;
}

/**
 * Breadth-first walk from `from` over its 8-connected component of `skel` (a skeleton, or any
 * mask): hop counts in `dist` (the caller fills it with -1; -1 stays where not reached) and each
 * pixel's predecessor in `back`. Returns the farthest pixel and the component's pixels.
 */
export function walk(skel: Uint8Array, size: number, from: number, dist: Int32Array, back: Int32Array): { far: number; members: number[] } {
  const members = [from];
  dist[from] = 0;
  back[from] = -1;
  let far = from;
  for (let head = 0; head < members.length; head++) {
    const cur = members[head];
    const cu = cur % size;
    const cv = (cur - cu) / size;
    for (let dv = -1; dv <= 1; dv++) {
      const v = cv + dv;
      if (v < 0 || v >= size) continue;
      for (let du = -1; du <= 1; du++) {
        const u = cu + du;
        if ((!du && !dv) || u < 0 || u >= size) continue;
        const j = v * size + u;
        if (!skel[j] || dist[j] >= 0) continue;
        dist[j] = dist[cur] + 1;
        back[j] = cur;
        members.push(j);
        if (dist[j] > dist[far]) far = j;
      }
    }
  }
  return { far, members };
}

/** Longest path (in hops) through the skeleton component of `start` (marked in `seen`): two walks. */
function componentDiameter(skel: Uint8Array, size: number, start: number, seen: Uint8Array): ModelPoint[] {
  const dist = new Int32Array(size * size).fill(-1);
  const back = new Int32Array(size * size);
  const first = walk(skel, size, start, dist, back);
  for (const j of first.members) {
    seen[j] = 1;
    dist[j] = -1;
  }
  const a = first.far;
  const second = walk(skel, size, a, dist, back);
  const path: ModelPoint[] = [];
  for (let j = second.far; j >= 0; j = back[j]) path.push([j % size, Math.floor(j / size)]);
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

/** LineCourse is a kept line traced by {@link lineCourse}: its ordered pixel path and its skeleton. */
export interface LineCourse {
  path: ModelPoint[];
  skeleton: Uint8Array;
}

/**
 * lineCourse traces a kept line mask (S x S, canonical frame) as one ordered pixel path: the
 * longest path through each skeleton piece, pieces joined end to end (nearest ends first, up to
 * `maxGap` model pixels apart; a join is a step longer than one pixel). Oriented as a palmist
 * reads the line: heart from the little-finger edge (small u), head from the thumb side (large u),
 * life from its start near the index (small v) toward the wrist. Also returns the skeleton. Empty
 * when the mask is empty.
 */
export function lineCourse(kept: Uint8Array, size: number, line: LineName, maxGap = size * 0.12): LineCourse {
  const skel = thin(kept, size);
  const seen = new Uint8Array(size * size);
  const pieces: ModelPoint[][] = [];
  for (let i = 0; i < skel.length; i++) {
    if (!skel[i] || seen[i]) continue;
    const p = componentDiameter(skel, size, i, seen);
    if (p.length) pieces.push(p);
  }
  if (!pieces.length) return { path: [], skeleton: skel };
  pieces.sort((a, b) => pathLength(b) - pathLength(a));
  let path = pieces.shift()!;
  const dist = (a: ModelPoint, b: ModelPoint) => Math.hypot(a[0] - b[0], a[1] - b[1]);
  for (let joined = true; joined && pieces.length; ) {
    joined = false;
    let best = -1;
    let bestGap = maxGap;
    let how = 0;
    pieces.forEach((p, k) => {
      const ends = [
        dist(path[path.length - 1], p[0]),
        dist(path[path.length - 1], p[p.length - 1]),
        dist(path[0], p[p.length - 1]),
        dist(path[0], p[0]),
      ];
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
  return { path, skeleton: skel };
}

/**
 * linePath is {@link lineCourse}'s path simplified (Douglas-Peucker) to at most
 * {@link MAX_POLYLINE_POINTS} points. Pinned by test/unit/inference/line-geometry.spec.ts.
 */
export function linePath(kept: Uint8Array, size: number, line: LineName, maxGap = size * 0.12): ModelPoint[] {
  return simplifyCourse(lineCourse(kept, size, line, maxGap).path);
}

/** simplifyCourse simplifies a {@link lineCourse} path to at most {@link MAX_POLYLINE_POINTS} points. */
export function simplifyCourse(path: readonly ModelPoint[]): ModelPoint[] {
  if (!path.length) return [];
  let eps = 0.75;
  let out = simplify(path, eps);
  while (out.length > MAX_POLYLINE_POINTS) {
    eps *= 1.5;
    out = simplify(path, eps);
  }
  return out;
}

/** polylineLength is the summed segment length of image-space points. */
export function polylineLength(points: readonly [number, number][]): number {
  return pathLength(points);
}
