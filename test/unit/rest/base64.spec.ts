import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { decodeBase64Lenient } from "../../../src/rest/base64.js";

const bytes = (s: string) => Buffer.from(s);

describe("decodeBase64Lenient()", () => {
  it.each([
    ["standard with padding", "aGVsbG8/Pz8+Pg==", "hello???>>"],
    ["URL-safe", "aGVsbG8_Pz8-Pg", "hello???>>"],
    ["without padding", "aGk", "hi"],
    ["with padding", "aGk=", "hi"],
    ["with line breaks and spaces", "aG Vs\r\nbG8=\n", "hello"],
    ["with a data-URL prefix", "data:image/png;base64,aGk=", "hi"],
    ["with an upper-case data-URL prefix", "DATA:image/jpeg;BASE64,aGk", "hi"],
  ])("decodes %s", (_, text, expected) => {
    expect(Buffer.from(decodeBase64Lenient(text)!)).toEqual(bytes(expected));
  });

  it.each([["$$$$"], ["abcde"], ["ab=c"], ["a==="], ["aGk=="], ["ö"], ["QUJń"], ["QUJDŁŁŁŁ"]])("refuses %j", (text) => {
    expect(decodeBase64Lenient(text)).toBeUndefined();
  });

  it("returns empty bytes for an empty string or a bare prefix", () => {
    expect(decodeBase64Lenient("")?.byteLength).toBe(0);
    expect(decodeBase64Lenient("data:image/jpeg;base64,")?.byteLength).toBe(0);
  });

  it("accepts and refuses exactly what the definition does, whatever the characters", () => {
    // The definition, written plainly: the alphabets (standard and URL-safe) and whitespace are
    // allowed before at most two trailing "=", whitespace is ignored, and the characters left
    // (with the padding, when there is any) must form whole 4-character groups but for a last
    // group of 2 or 3. The decoder's fast path must never accept a string this refuses.
    const reference = (text: string): Buffer | undefined => {
      const m = /^([A-Za-z0-9+/_\-\s]*?)((?:=\s*){0,2})$/.exec(text.replace(/\s+$/, ""));
      if (!m) return undefined;
      const chars = m[1].replace(/\s/g, "");
      const pad = m[2].replace(/\s/g, "").length;
      if (chars.length % 4 === 1 || (pad > 0 && (chars.length + pad) % 4 !== 0)) return undefined;
      return Buffer.from(chars, "base64");
    };
    // "Ł" (U+0141) and "ń" (U+0144): Node's base64 decoder reads a character by its low byte ("A", "D").
    const piece = fc.constantFrom(
      "QUJD",
      "aGk",
      "A",
      "+",
      "/",
      "-",
      "_",
      "=",
      "==",
      " ",
      "\n",
      "\t",
      "!",
      ".",
      "ö",
      "😀",
      "\u0000",
      "Ł",
      "ń",
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 24 }), (pieces) => {
        const text = pieces.join("");
        const got = decodeBase64Lenient(text);
        const want = reference(text);
        expect(got === undefined, JSON.stringify(text)).toBe(want === undefined);
        if (got && want) expect(Buffer.from(got), JSON.stringify(text)).toEqual(want);
      }),
      { numRuns: 2000 },
    );
  });

  it("round-trips any bytes in every accepted spelling", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), fc.boolean(), fc.boolean(), fc.nat(20), (data, urlSafe, pad, wrap) => {
        let s = Buffer.from(data).toString("base64");
        if (urlSafe) s = s.replace(/\+/g, "-").replace(/\//g, "_");
        if (!pad) s = s.replace(/=+$/, "");
        if (wrap > 0) s = s.replace(new RegExp(`(.{${wrap}})`, "g"), "$1\n");
        expect(Buffer.from(decodeBase64Lenient(s)!)).toEqual(Buffer.from(data));
      }),
    );
  });
});
