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
