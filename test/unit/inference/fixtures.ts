/**
 * Test helpers for the engine: the committed synthetic fixtures (test/fixtures/palms, made by
 * make_fixtures.py from training/synth.py) and a tolerant overlap measure.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import sharp from "sharp";
import type { LineName } from "../../../src/inference/analyzer-types.js";

/** FIXTURES is the folder of the synthetic palm fixtures. */
export const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), "../../fixtures/palms");

/** Fixture is one manifest entry. */
export interface Fixture {
  name: string;
  kind: "crop" | "scene" | "negative" | "hand" | "hand-back";
}

/** fixtures lists the manifest. */
export function fixtures(): Fixture[] {
  return JSON.parse(readFileSync(join(FIXTURES, "manifest.json"), "utf8")) as Fixture[];
}

/** fixtureImage returns the JPEG bytes of a fixture. */
export function fixtureImage(name: string): Buffer {
  return readFileSync(join(FIXTURES, `${name}.jpg`));
}

const BITS: Record<LineName | "palm", number> = { palm: 1, heart: 2, head: 4, life: 8 };

/** trueMask returns a fixture's true mask of one channel as 0/1 bytes, with its size. */
export async function trueMask(name: string, channel: LineName | "palm"): Promise<{ data: Uint8Array; width: number; height: number }> {
  const { data, info } = await sharp(join(FIXTURES, `${name}.mask.png`))
    .toColourspace("b-w")
    .raw()
    .toBuffer({ resolveWithObject: true });
  const out = new Uint8Array(info.width * info.height);
  for (let i = 0; i < out.length; i++) out[i] = data[i] & BITS[channel] ? 1 : 0;
  return { data: out, width: info.width, height: info.height };
}

/** decodeMask decodes an engine mask PNG to 0/255 bytes, checking it is single-channel. */
export async function decodeMask(png: Uint8Array): Promise<{ data: Uint8Array; width: number; height: number; channels: number }> {
  const meta = await sharp(png).metadata();
  const { data, info } = await sharp(png).toColourspace("b-w").raw().toBuffer({ resolveWithObject: true });
  return { data, width: info.width, height: info.height, channels: meta.channels };
}

/** Squared-distance-free dilation test: is there a set pixel within `tol` (Chebyshev) of (x, y)? */
function near(mask: Uint8Array, w: number, h: number, x: number, y: number, tol: number): boolean {
  for (let yy = Math.max(0, y - tol); yy <= Math.min(h - 1, y + tol); yy++) {
    for (let xx = Math.max(0, x - tol); xx <= Math.min(w - 1, x + tol); xx++) if (mask[yy * w + xx]) return true;
  }
  return false;
}

/**
 * tolerantF1 is the line-pixel F1 with a tolerance, as training's evaluation defines it:
 * precision = share of predicted pixels within `tol` px of a true pixel, recall = share of true
 * pixels within `tol` px of a predicted one. Both masks are non-zero-is-set, same size.
 */
export function tolerantF1(
  pred: Uint8Array,
  truth: Uint8Array,
  w: number,
  h: number,
  tol: number,
): { precision: number; recall: number; f1: number } {
  let p = 0,
    tp = 0,
    t = 0,
    tr = 0;
  for (let y = 0; y < h; y++) {
    for (let x = 0; x < w; x++) {
      const i = y * w + x;
      if (pred[i]) {
        p++;
        if (near(truth, w, h, x, y, tol)) tp++;
      }
      if (truth[i]) {
        t++;
        if (near(pred, w, h, x, y, tol)) tr++;
      }
    }
  }
  const precision = p ? tp / p : 0;
  const recall = t ? tr / t : 0;
  const f1 = precision + recall > 0 ? (2 * precision * recall) / (precision + recall) : 0;
  return { precision, recall, f1 };
}
