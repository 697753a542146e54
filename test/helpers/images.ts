/**
 * Small synthetic test images made with sharp (no palm in them: a valid analysis still answers
 * 200 with every line detected:false).
 */
import sharp from "sharp";

/** makeImage renders a w×h gradient with a dark stroke, as JPEG or PNG. */
export async function makeImage(width = 256, height = 256, format: "jpeg" | "png" = "jpeg"): Promise<Buffer> {
  const raw = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      raw[i] = (180 + (x * 60) / width) | 0;
      raw[i + 1] = (130 + (y * 60) / height) | 0;
      raw[i + 2] = 110;
      if (Math.abs(y - height / 2 - 0.3 * (x - width / 2)) < 2) raw.fill(70, i, i + 3);
    }
  }
  const img = sharp(raw, { raw: { width, height, channels: 3 } });
  return format === "jpeg" ? img.jpeg({ quality: 85 }).toBuffer() : img.png().toBuffer();
}

/**
 * makeHandPhoto is the README's sample photo (a whole synthetic hand) scaled to a 12 MP portrait
 * JPEG: an analysis that runs every stage of the engine, for tests that need one to take a while.
 */
export async function makeHandPhoto(width = 3024, height = 4032): Promise<Buffer> {
  return sharp(new URL("../../examples/sample-palm.jpg", import.meta.url).pathname)
    .resize(width, height)
    .jpeg({ quality: 90 })
    .toBuffer();
}

/**
 * strokeMask sets to 1 the pixels of a size x size mask within r of the segments through `points`
 * (discs along each segment, two per pixel of its length): a line mask for the line-geometry tests.
 */
export function strokeMask(
  size: number,
  points: readonly [number, number][],
  r: number,
  into: Uint8Array = new Uint8Array(size * size),
): Uint8Array {
  for (let i = 1; i < points.length; i++) {
    const [ax, ay] = points[i - 1];
    const [bx, by] = points[i];
    const n = Math.ceil(Math.hypot(bx - ax, by - ay) * 2);
    for (let k = 0; k <= n; k++) {
      const x = ax + ((bx - ax) * k) / n;
      const y = ay + ((by - ay) * k) / n;
      for (let v = Math.floor(y - r); v <= Math.ceil(y + r); v++)
        for (let u = Math.floor(x - r); u <= Math.ceil(x + r); u++)
          if (u >= 0 && v >= 0 && u < size && v < size && (u - x) ** 2 + (v - y) ** 2 <= r * r) into[v * size + u] = 1;
    }
  }
  return into;
}
