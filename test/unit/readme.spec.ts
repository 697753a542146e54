/**
 * The README documents every error code and every configuration variable (STYLE.md: a test
 * fails if an error reason is missing from the README).
 */
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES } from "../../src/config.js";
import { ERRORS } from "../../src/errors.js";

const readme = readFileSync(new URL("../../README.md", import.meta.url), "utf8");

describe("README.md", () => {
  it.each(Object.keys(ERRORS))("documents the error code %s in a table row", (reason) => {
    expect(readme).toMatch(new RegExp(`^\\|.*\`${reason}\`.*\\|`, "m"));
  });

  it.each(CONFIG_VARIABLES.map((v) => v.name))("documents the variable %s in the configuration table", (name) => {
    expect(readme).toMatch(new RegExp(`^\\| \`${name}\` \\|`, "m"));
  });

  it("gives the two newcomer commands", () => {
    expect(readme).toContain("npm install && npm start");
    expect(readme).toContain("npm test");
  });
});
