/**
 * Benchmark inputs, generated on the fly into a temporary directory (multi-MB files are not
 * committed): the README's sample photo (a whole hand from the synthetic generator) upscaled to
 * portrait phone resolutions, with sensor-like noise added so that the files compress like real
 * photos (a 12 MP phone JPEG is about 3.5 MB).
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";

/** Workload is one benchmark input file. */
export interface Workload {
  /** Short name for tables, e.g. "12MP JPEG". */
  name: string;
  width: number;
  height: number;
  format: "jpeg" | "png";
  bytes: Buffer;
  path: string;
}

/** The README's sample: a whole hand, so that every stage of the engine runs (landmarks, frame, lines). */
const SCENE = new URL("../examples/sample-palm.jpg", import.meta.url);

/** photo renders the scene at width x height (cover), plus gaussian noise of `sigma` grey levels. */
async function photo(width: number, height: number, sigma: number): Promise<Buffer> {
  const base = await sharp(SCENE.pathname).resize(width, height, { fit: "cover", kernel: "lanczos3" }).raw().toBuffer();
  if (sigma === 0) return base;
  const noise = await sharp({ create: { width, height, channels: 3, background: "#000", noise: { type: "gaussian", mean: 128, sigma } } })
    .raw()
    .toBuffer();
  // The generator writes unsigned bytes: noise around 128, re-centred on 0 here.
  const out = Buffer.alloc(base.byteLength);
  for (let i = 0; i < base.byteLength; i++) out[i] = Math.max(0, Math.min(255, base[i] + noise[i] - 128));
  return out;
}

/** makeWorkloads writes the three issue-4 workloads to a fresh temporary directory. */
export async function makeWorkloads(): Promise<{ dir: string; workloads: Workload[] }> {
  const dir = mkdtempSync(join(tmpdir(), "palm-bench-"));
  const specs = [
    { name: "12MP JPEG", width: 3024, height: 4032, format: "jpeg" as const, sigma: 8, quality: 92 },
    { name: "1MP JPEG", width: 864, height: 1152, format: "jpeg" as const, sigma: 6, quality: 90 },
    { name: "2MP PNG", width: 1224, height: 1632, format: "png" as const, sigma: 0, quality: 0 },
  ];
  const workloads: Workload[] = [];
  for (const s of specs) {
    const raw = await photo(s.width, s.height, s.sigma);
    const img = sharp(raw, { raw: { width: s.width, height: s.height, channels: 3 } });
    const bytes = s.format === "jpeg" ? await img.jpeg({ quality: s.quality }).toBuffer() : await img.png().toBuffer();
    const path = join(dir, `${s.name.replace(/\s+/g, "-").toLowerCase()}.${s.format === "jpeg" ? "jpg" : "png"}`);
    writeFileSync(path, bytes);
    workloads.push({ name: s.name, width: s.width, height: s.height, format: s.format, bytes, path });
  }
  return { dir, workloads };
}
