/**
 * A JPEG's decoding cost read from its markers, before any pixel is decoded: a progressive JPEG's
 * decoder passes over the component's blocks once per scan, so a small file of thousands of
 * nearly empty scans costs what thousands of photos of its size do (issue 29, finding 3).
 */
import { ImageError } from "../engine-errors.js";

/**
 * MAX_JPEG_SCANS is the most scans a JPEG may have. Every standard progression has at most 26
 * (libjpeg's for 4 components; 10 for a colour photo) and a baseline JPEG 1 to 4; measurements
 * against the cost of an ordinary JPEG in docs/decisions/jpeg-scan-limit.md.
 */
export const MAX_JPEG_SCANS = 64;

/** JpegStructure is what {@link readJpegStructure} counts. */
export interface JpegStructure {
  /** Start-of-scan segments. */
  scans: number;
  /** The frame's SOF marker (0xC0-0xCF less 0xC4, 0xC8, 0xCC); undefined when none was found. */
  frame?: number;
}

/** Frame markers of the JPEG processes this service decodes: baseline, extended and progressive Huffman. */
const HUFFMAN_FRAMES = new Set([0xc0, 0xc1, 0xc2]);

/**
 * readJpegStructure walks the markers of `bytes` (a JPEG by its leading bytes) and counts the
 * scans, skipping entropy-coded data as a decoder does (0xFF00 stuffing, RSTn) and, like libjpeg,
 * searching past stray bytes for the next marker; stops at EOI, at the end, or at a segment
 * whose length runs past the end (the decoder then refuses the file as truncated).
 */
export function readJpegStructure(bytes: Uint8Array): JpegStructure {
  const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let scans = 0;
  let frame: number | undefined;
  let i = 2; // after SOI
  for (;;) {
    i = b.indexOf(0xff, i);
    if (i < 0 || i + 1 >= b.length) break;
    while (i + 1 < b.length && b[i + 1] === 0xff) i++; // fill bytes before a marker
    if (i + 1 >= b.length) break;
    const marker = b[i + 1];
    // Stuffed zeros, restart markers, SOI and TEM carry no length.
    if (marker === 0x00 || (marker >= 0xd0 && marker <= 0xd8) || marker === 0x01) {
      i += 2;
      continue;
    }
    if (marker === 0xd9) break; // EOI
    if (i + 3 >= b.length) break;
    const end = i + 2 + b.readUInt16BE(i + 2);
    if (end > b.length) break;
    if (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) frame ??= marker;
    if (marker === 0xda) scans++;
    // After SOS come its entropy-coded bytes, searched for the next marker like any stray byte.
    i = end;
  }
  return { scans, frame };
}

/**
 * checkJpegCost throws {@link ImageError} `invalid_image` for a JPEG whose decoding costs more
 * than its pixel count says: more than {@link MAX_JPEG_SCANS} scans, or a coding other than
 * Huffman baseline, extended or progressive (arithmetic, lossless, hierarchical: no phone or
 * browser makes them). Test: test/unit/image/jpeg-structure.spec.ts.
 */
export function checkJpegCost(bytes: Uint8Array): void {
  const { scans, frame } = readJpegStructure(bytes);
  if (frame !== undefined && !HUFFMAN_FRAMES.has(frame)) {
    throw new ImageError(
      "invalid_image",
      "Only baseline and progressive JPEGs are accepted (not arithmetic-coded or lossless or hierarchical ones).",
    );
  }
  if (scans > MAX_JPEG_SCANS) {
    throw new ImageError("invalid_image", `The JPEG image has ${scans} scans (at most ${MAX_JPEG_SCANS} are accepted).`);
  }
}
