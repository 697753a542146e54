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

  it.each([["$$$$"], ["abcde"], ["ab=c"], ["a==="], ["aGk=="], ["ö"]])("refuses %j", (text) => {
    expect(decodeBase64Lenient(text)).toBeUndefined();
  });

  it("returns empty bytes for an empty string or a bare prefix", () => {
    expect(decodeBase64Lenient("")?.byteLength).toBe(0);
    expect(decodeBase64Lenient("data:image/jpeg;base64,")?.byteLength).toBe(0);
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
