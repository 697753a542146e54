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
 * running-window passes, cost independent of the radius), clipped to the image.
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
  // Horizontal pass: h[y][x] = any set pixel in row y within [x - r, x + r].
  const h = new Uint8Array(bw * bh);
  for (let sy = mask.y0; sy < mask.y1; sy++) {
    const src = (sy - mask.y0) * sw - mask.x0; // src + c is image column c
    const dst = (sy - y0) * bw - x0; // dst + X is image column X
    const val = (c: number): number => (c >= mask.x0 && c < mask.x1 ? mask.data[src + c] : 0);
    let count = 0;
    for (let c = x0 - 1 - r; c <= x0 - 1 + r; c++) count += val(c);
    for (let X = x0; X < x1; X++) {
      count += val(X + r) - val(X - r - 1);
      if (count > 0) h[dst + X] = 1;
    }
  }
  // Vertical pass over columns with a running count of set rows in the window.
  const out = new Uint8Array(bw * bh);
  const count = new Int32Array(bw);
  for (let y = -r; y < bh + r; y++) {
    const add = y + r;
    if (add < bh) {
      const base = add * bw;
      for (let x = 0; x < bw; x++) count[x] += h[base + x];
    }
    const rem = y - r - 1;
    if (rem >= 0 && rem < bh) {
      const base = rem * bw;
      for (let x = 0; x < bw; x++) count[x] -= h[base + x];
    }
    if (y >= 0 && y < bh) {
      const base = y * bw;
      for (let x = 0; x < bw; x++) if (count[x] > 0) out[base + x] = 1;
    }
  }
  return { width: mask.width, height: mask.height, x0, y0, x1, y1, data: out };
}
