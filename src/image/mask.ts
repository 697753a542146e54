/**
 * Binary masks at full image size, stored sparsely: only the bounding box of the set pixels is
 * kept, since a line covers well under 1% of a photo.
 */

/**
 * BoxMask is a width x height binary mask whose set pixels all lie inside the box
 * [x0, x1) x [y0, y1); `data` holds that box row-major, 1 byte per pixel, 0 or 1.
 * An empty mask has x1 <= x0 or y1 <= y0 and an empty `data`.
 */
export interface BoxMask {
  width: number;
  height: number;
  x0: number;
  y0: number;
  x1: number;
  y1: number;
  data: Uint8Array;
}

/** emptyMask returns a width x height mask with no pixel set. */
export function emptyMask(width: number, height: number): BoxMask {
  return { width, height, x0: 0, y0: 0, x1: 0, y1: 0, data: new Uint8Array(0) };
}

/** countMask returns the number of set pixels of a mask. */
export function countMask(mask: BoxMask): number {
  let n = 0;
  const d = mask.data;
  for (let i = 0; i < d.length; i++) n += d[i];
  return n;
}

/** maskToBytes expands a mask to a full width x height byte image with 0 and `on` (default 255). */
export function maskToBytes(mask: BoxMask, on = 255): Uint8Array {
  const out = new Uint8Array(mask.width * mask.height);
  const bw = mask.x1 - mask.x0;
  for (let y = mask.y0; y < mask.y1; y++) {
    const row = (y - mask.y0) * bw;
    const base = y * mask.width + mask.x0;
    for (let x = 0; x < bw; x++) if (mask.data[row + x]) out[base + x] = on;
  }
  return out;
}

/**
 * dilateMask grows a mask by `radius` pixels with a square structuring element (two separable
 * passes: runs widened along rows, then a running count down columns restricted to each row's
 * extent), clipped to the image. Cost about proportional to the dilated area.
 */
export function dilateMask(mask: BoxMask, radius: number): BoxMask {
  const r = Math.max(0, Math.floor(radius));
  if (r === 0 || mask.x1 <= mask.x0 || mask.y1 <= mask.y0) return mask;
  const x0 = Math.max(0, mask.x0 - r);
  const y0 = Math.max(0, mask.y0 - r);
  const x1 = Math.min(mask.width, mask.x1 + r);
  const y1 = Math.min(mask.height, mask.y1 + r);
  const bw = x1 - x0;
  const bh = y1 - y0;
  const sw = mask.x1 - mask.x0;
  const src = mask.data;
  // Horizontal pass: every run [a, b) of a source row becomes [a - r, b + r) in h.
  const h = new Uint8Array(bw * bh);
  const lo = new Int32Array(bh).fill(bw); // extent of each h row, [lo, hi)
  const hi = new Int32Array(bh);
  const shift = mask.x0 - x0; // source column c is box column c + shift
  for (let sy = mask.y0; sy < mask.y1; sy++) {
    const y = sy - y0;
    const base = (sy - mask.y0) * sw;
    let c = 0;
    while (c < sw) {
      while (c < sw && src[base + c] === 0) c++;
      if (c >= sw) break;
      const a = c;
      while (c < sw && src[base + c] !== 0) c++;
      const start = Math.max(0, a + shift - r);
      const end = Math.min(bw, c + shift + r);
      h.fill(1, y * bw + start, y * bw + end);
      if (start < lo[y]) lo[y] = start;
      if (end > hi[y]) hi[y] = end;
    }
  }
  // Vertical pass: out[y][x] = any h[y'][x] for |y' - y| <= r, with a running count per
  // column, touching only the columns that rows entering or leaving the window cover.
  const out = new Uint8Array(bw * bh);
  const count = new Int32Array(bw);
  let active = 0; // rows with a non-empty extent inside the window
  let wlo = bw;
  let whi = 0;
  for (let y = -r; y < bh; y++) {
    const add = y + r;
    if (add < bh && lo[add] < hi[add]) {
      const b = add * bw;
      for (let x = lo[add]; x < hi[add]; x++) count[x] += h[b + x];
      active++;
      if (lo[add] < wlo) wlo = lo[add];
      if (hi[add] > whi) whi = hi[add];
    }
    const rem = y - r - 1;
    if (rem >= 0 && lo[rem] < hi[rem]) {
      const b = rem * bw;
      for (let x = lo[rem]; x < hi[rem]; x++) count[x] -= h[b + x];
      active--;
    }
    if (y < 0) continue;
    if (active === 0) {
      wlo = bw;
      whi = 0;
      continue;
    }
    const b = y * bw;
    for (let x = wlo; x < whi; x++) if (count[x] > 0) out[b + x] = 1;
  }
  return { width: mask.width, height: mask.height, x0, y0, x1, y1, data: out };
}
