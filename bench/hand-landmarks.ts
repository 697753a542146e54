/**
 * hand-landmarks times the hand landmarker per stage (palm detector, each landmark pass) on the
 * shared real photos downscaled to a 640-pixel longest side: model load, the first (cold)
 * detection without warm-up, then warm repeats (median and max). One onnxruntime thread, as in a
 * worker process.
 *
 *   node --import tsx bench/hand-landmarks.ts [--repeats 10] [--threads 1] [--dir ../shared/real-palms]
 */
import { readdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { performance } from "node:perf_hooks";
import sharp from "sharp";
import { createHandLandmarker } from "../src/landmarks/hand-landmarker.js";
import { argValue } from "./args.js";

const dir = resolve(argValue("--dir") ?? "../shared/real-palms");
const repeats = Number(argValue("--repeats") ?? 10);
const threads = Number(argValue("--threads") ?? 1);

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}
const ms = (x: number) => `${x.toFixed(1)} ms`;

let files: string[];
try {
  files = readdirSync(dir).filter((f) => /\.jpe?g$/i.test(f)).sort();
} catch {
  console.error(`hand-landmarks: ${dir} is absent`);
  process.exit(1);
}
const images = await Promise.all(
  files.map(async (f) => {
    const { data, info } = await sharp(join(dir, f)).rotate().resize(640, 640, { fit: "inside" }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    return { f, data, width: info.width, height: info.height };
  }),
);

const t0 = performance.now();
const lm = await createHandLandmarker({ warmUp: false, intraOpNumThreads: threads });
console.log(`load (both sessions): ${ms(performance.now() - t0)}`);
for (const [i, im] of images.entries()) {
  await lm.detect(im.data, im.width, im.height);
  const cold = lm.lastTimings!;
  const palm: number[] = [];
  const pass1: number[] = [];
  const pass2: number[] = [];
  const total: number[] = [];
  for (let r = 0; r < repeats; r++) {
    await lm.detect(im.data, im.width, im.height);
    const t = lm.lastTimings!;
    palm.push(t.palm);
    pass1.push(t.landmarks[0] ?? NaN);
    pass2.push(t.landmarks[1] ?? NaN);
    total.push(t.total);
  }
  console.log(
    `${im.f} ${im.width}x${im.height}: ${i === 0 ? "COLD" : "first"} palm ${ms(cold.palm)}, landmarks ${cold.landmarks.map(ms).join(" + ")}, total ${ms(cold.total)}; ` +
      `warm median palm ${ms(median(palm))}, landmarks ${ms(median(pass1))} + ${ms(median(pass2))}, total ${ms(median(total))} (max ${ms(Math.max(...total))})`,
  );
}
await lm.close();
