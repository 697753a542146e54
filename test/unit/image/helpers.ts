/**
 * Test helpers: small images built in memory with sharp and by hand (PNG chunks), so that
 * each bad-input case is explicit in the test that uses it.
 */
import { deflateSync } from "node:zlib";
import sharp from "sharp";
import { PNG_SIGNATURE, pngChunk } from "../../../src/image/encode.js";

/** asymmetricRgb returns a w x h RGB image whose four quadrants have distinct colours: top-left red, top-right green, bottom-left blue, bottom-right white. */
export function asymmetricRgb(width: number, height: number): Buffer {
  const data = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = (y * width + x) * 3;
      const right = x >= width / 2;
      const bottom = y >= height / 2;
      const c = !bottom ? (!right ? [255, 0, 0] : [0, 255, 0]) : !right ? [0, 0, 255] : [255, 255, 255];
      data[i] = c[0];
      data[i + 1] = c[1];
      data[i + 2] = c[2];
    }
  }
  return data;
}

/** jpegOf encodes raw RGB as JPEG. */
export function jpegOf(raw: Buffer, width: number, height: number, options: import("sharp").JpegOptions = {}): Promise<Buffer> {
  return sharp(raw, { raw: { width, height, channels: 3 } })
    .jpeg({ quality: 95, ...options })
    .toBuffer();
}

/** pngOf encodes raw pixels as PNG. */
export function pngOf(raw: Buffer, width: number, height: number, channels: 1 | 2 | 3 | 4 = 3): Promise<Buffer> {
  return sharp(raw, { raw: { width, height, channels } }).png().toBuffer();
}

/** solidJpeg is a plain grey JPEG of the given size. */
export function solidJpeg(width: number, height: number): Promise<Buffer> {
  return sharp({ create: { width, height, channels: 3, background: { r: 128, g: 128, b: 128 } } })
    .jpeg()
    .toBuffer();
}

/**
 * pngBomb is a valid-looking ~100-byte PNG whose header declares width x height 8-bit grey
 * pixels (a decompression bomb when large): the IDAT holds only a few rows of zeros.
 */
export function pngBomb(width: number, height: number): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 0;
  const idat = deflateSync(Buffer.alloc(4 * (width + 1)));
  return Buffer.concat([PNG_SIGNATURE, pngChunk("IHDR", ihdr), pngChunk("IDAT", idat), pngChunk("IEND", new Uint8Array(0))]);
}

/** corruptPngCrc flips the CRC of the first IDAT chunk of a PNG. */
export function corruptPngCrc(png: Buffer): Buffer {
  const out = Buffer.from(png);
  let pos = 8;
  while (pos < out.length) {
    const len = out.readUInt32BE(pos);
    const type = out.toString("ascii", pos + 4, pos + 8);
    if (type === "IDAT") {
      out[pos + 8 + len] ^= 0xff;
      return out;
    }
    pos += 12 + len;
  }
  throw new Error("no IDAT");
}
