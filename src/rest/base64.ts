/**
 * Lenient base64 for REST clients (SPEC.md section 2): standard or URL-safe alphabet, padding
 * optional, whitespace and line breaks ignored, a `data:<type>;base64,` prefix stripped.
 *
 * Built for 5 MiB images and for bodies that are not base64 at all (issue 29, finding 2: a 7.4 MiB
 * string invalid at its very end): Node's decoder (which accepts both alphabets) decodes once, and
 * tells by the length of what it wrote whether it skipped a character; no regex scans the string
 * unless it holds a character outside ASCII.
 */

const DATA_URL_PREFIX = /^data:[^,]{0,200};base64,/i;
/** Every character allowed before the padding. */
const BODY = /^[A-Za-z0-9+/_\-\s]*$/;
const WHITESPACE = /\s/g;

/**
 * decodeBase64Lenient decodes `text`, or returns undefined when it is not base64.
 * An empty result (after stripping) returns an empty array: the caller decides it is "missing".
 */
export function decodeBase64Lenient(text: string): Uint8Array | undefined {
  let s = text;
  if (s.length > 5 && (s.charCodeAt(0) | 0x20) === 0x64 /* d */ && /^data:/i.test(s.slice(0, 5))) {
    s = s.replace(DATA_URL_PREFIX, "");
  }
  // Trailing padding (at most two "="), possibly with whitespace around it.
  let end = s.length;
  let pad = 0;
  while (end > 0) {
    const c = s.charCodeAt(end - 1);
    if (c === 0x3d /* = */) pad++;
    else if (!isSpace(c)) break;
    end--;
  }
  if (pad > 2) return undefined;
  const body = end === s.length ? s : s.slice(0, end);
  // Node's decoder reads a character outside ASCII by its low byte ("Ł", U+0141, as "A"): such a
  // string is checked by the regex first (test/unit/rest/base64.spec.ts, "refuses").
  const ascii = Buffer.byteLength(body, "utf8") === body.length;
  if (!ascii && !BODY.test(body)) return undefined;
  // Node's decoder skips every ASCII character outside both alphabets (whitespace, and anything
  // invalid) and stops at an inner "=". Of n characters with n % 4 != 1, it has used them all
  // exactly when it wrote 3/4 of n bytes, rounded down (one fewer used writes fewer). So one
  // decode and, only when it skipped something, one count of the whitespace tell valid from not:
  // the 7.4 MiB invalid body of finding 2 costs that instead of two regex scans and a second
  // decode (bench/RESULTS.md, issue 29).
  const buf = Buffer.from(body, "base64");
  let chars = body.length;
  if (chars % 4 === 1 || buf.byteLength !== Math.floor((chars * 3) / 4)) chars -= body.match(WHITESPACE)?.length ?? 0;
  if (chars % 4 === 1) return undefined;
  if (pad > 0 && (chars + pad) % 4 !== 0) return undefined;
  if (buf.byteLength !== Math.floor((chars * 3) / 4)) return undefined;
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

function isSpace(c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09 || c === 0x0c || c === 0x0b;
}
