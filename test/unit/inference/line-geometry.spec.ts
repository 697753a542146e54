import { describe, expect, it } from "vitest";
import { linePath, MAX_POLYLINE_POINTS, thin } from "../../../src/inference/line-geometry.js";
import { strokeMask } from "../../helpers/images.js";

const S = 64;

/** A binary S x S mask of a thick stroke through the given points (disc of radius r at each step). */
function stroke(points: [number, number][], r = 1.5): Uint8Array {
  return strokeMask(S, points, r);
}

describe("thin()", () => {
  it("reduces a 3-pixel-wide bar to a 1-pixel line of about its length", () => {
    const skel = thin(
      stroke([
        [10, 30],
        [50, 30],
      ]),
      S,
    );
    const rows = new Set<number>();
    let n = 0;
    for (let i = 0; i < skel.length; i++) if (skel[i]) n++, rows.add(Math.floor(i / S));
    expect(rows.size).toBe(1);
    expect(n).toBeGreaterThan(35);
  });
});

describe("linePath()", () => {
  it("traces a curved stroke end to end, simplified, oriented as the line is read", () => {
    const pts: [number, number][] = [
      [8, 10],
      [20, 22],
      [28, 36],
      [32, 54],
    ];
    const path = linePath(stroke(pts), S, "life");
    expect(path.length).toBeGreaterThanOrEqual(3);
    expect(path.length).toBeLessThanOrEqual(MAX_POLYLINE_POINTS);
    // life runs from its start (top) toward the wrist (bottom)
    expect(path[0][1]).toBeLessThan(path[path.length - 1][1]);
    expect(Math.hypot(path[0][0] - 8, path[0][1] - 10)).toBeLessThan(3);
    expect(Math.hypot(path[path.length - 1][0] - 32, path[path.length - 1][1] - 54)).toBeLessThan(3);
  });

  it("joins the pieces of a broken crease into one path, and reads heart and head in opposite directions", () => {
    const m = stroke([
      [5, 20],
      [25, 20],
    ]);
    const second = stroke([
      [30, 21],
      [58, 24],
    ]);
    for (let i = 0; i < m.length; i++) m[i] |= second[i];
    const heart = linePath(m, S, "heart");
    expect(heart[0][0]).toBeLessThan(8);
    expect(heart[heart.length - 1][0]).toBeGreaterThan(55);
    const head = linePath(m, S, "head");
    expect(head[0][0]).toBeGreaterThan(55);
  });

  it("returns no path for an empty mask", () => {
    expect(linePath(new Uint8Array(S * S), S, "head")).toEqual([]);
  });
});
