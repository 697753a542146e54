/**
 * What a JPEG's scans cost to decode (issue 29, finding 3): 10,000 x 4,000 decoded as the engine
 * decodes (sharp, flattened, sRGB, raw), without the scan bound (src/image/jpeg-structure.ts), for
 * a baseline photo, the same photo progressive (10 scans), the worst file the bound lets through
 * (64 scans, every one over the whole image) and the attack (2,647 scans).
 */
import sharp from "sharp";
import { makeManyScanJpeg } from "../test/helpers/jpeg-scans.js";
import { median } from "./stats.js";

/** ScanCost is one file's median decode time. */
export interface ScanCost {
  name: string;
  scans: number;
  bytes: number;
  ms: number;
}

async function decodeMs(bytes: Buffer): Promise<number> {
  const t0 = performance.now();
  await sharp(bytes, { limitInputPixels: 40_000_000, failOn: "error", autoOrient: true })
    .flatten({ background: { r: 255, g: 255, b: 255 } })
    .toColourspace("srgb")
    .raw({ depth: "uchar" })
    .toBuffer();
  return performance.now() - t0;
}

/**
 * jpegScanCosts decodes each file `rounds` times, the files in turn within a round (the attack
 * once only: it takes seconds), and returns the median times.
 */
export async function jpegScanCosts(rounds: number): Promise<ScanCost[]> {
  sharp.cache(false); // as the analysis worker
  const W = 10_000;
  const H = 4000;
  const scene = sharp(new URL("../examples/sample-palm.jpg", import.meta.url).pathname).resize(W, H, { fit: "fill" });
  const files = [
    { name: "baseline photo", scans: 1, bytes: await scene.clone().jpeg({ quality: 90 }).toBuffer() },
    { name: "progressive photo", scans: 10, bytes: await scene.clone().jpeg({ quality: 90, progressive: true }).toBuffer() },
    { name: "at the bound", scans: 64, bytes: makeManyScanJpeg(W, H, { components: 1, acBits: 1 }) },
    { name: "the attack", scans: 2647, bytes: makeManyScanJpeg(W, H) },
  ];
  const times = files.map(() => [] as number[]);
  for (const f of files) if (f.scans < 1000) await decodeMs(f.bytes); // warm-up, untimed
  for (let r = 0; r < rounds; r++) {
    for (let i = 0; i < files.length; i++) {
      if (files[i].scans > 1000 && r > 0) continue;
      times[i].push(await decodeMs(files[i].bytes));
    }
  }
  return files.map((f, i) => ({ name: f.name, scans: f.scans, bytes: f.bytes.byteLength, ms: median(times[i]) }));
}
