/**
 * Lenient base64 for REST clients (SPEC.md section 2): standard or URL-safe alphabet, padding
 * optional, whitespace and line breaks ignored, a `data:<type>;base64,` prefix stripped.
 */

const DATA_URL_PREFIX = /^data:[^,]{0,200};base64,/i;
const ALPHABET = /^[A-Za-z0-9+/_-]*$/;

/**
 * decodeBase64Lenient decodes `text`, or returns undefined when it is not base64.
 * An empty result (after stripping) returns an empty array: the caller decides it is "missing".
 */
export function decodeBase64Lenient(text: string): Uint8Array | undefined {
  let s = text.replace(DATA_URL_PREFIX, "");
  s = s.replace(/[\s]+/g, "");
  // Padding only at the very end, at most two characters.
  const pad = /=*$/.exec(s)?.[0].length ?? 0;
  if (pad > 2) return undefined;
  s = s.slice(0, s.length - pad);
  if (!ALPHABET.test(s)) return undefined;
  if (s.length % 4 === 1) return undefined;
  if (pad > 0 && (s.length + pad) % 4 !== 0) return undefined;
  const buf = Buffer.from(s.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}
