/**
 * The documentation: every error code in the API reference's error table, every configuration
 * variable in the operations guide's table (STYLE.md: a test fails if an error reason is
 * undocumented), a README whose first screen is the quick start, and no link leaving the
 * repository.
 */
import { existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, expect, it } from "vitest";
import { CONFIG_VARIABLES, renderConfigTable } from "../../src/config.js";
import { ERRORS } from "../../src/errors.js";

const root = new URL("../../", import.meta.url).pathname;
const read = (path: string) => readFileSync(join(root, path), "utf8");
const readme = read("README.md");
const api = read("docs/api.md");
const operations = read("docs/operations.md");
const DOCS = ["README.md", "CHANGELOG.md", "docs/api.md", "docs/operations.md", "docs/design.md"];

describe("docs/api.md", () => {
  it.each(Object.keys(ERRORS))("documents the error code %s in a table row", (reason) => {
    expect(api).toMatch(new RegExp(`^\\| \`${reason}\` \\|`, "m"));
  });
});

describe("docs/operations.md", () => {
  it("has the configuration table made from the config schema (npm run docs:config writes it)", () => {
    expect(operations).toContain(`\n${renderConfigTable()}\n`);
  });

  it.each(CONFIG_VARIABLES.map((v) => v.name))("documents the variable %s in the configuration table", (name) => {
    expect(operations).toMatch(new RegExp(`^\\| \`${name}\` \\|`, "m"));
  });
});

describe("README.md", () => {
  const firstScreen = readme.split("\n").slice(0, 40).join("\n");

  it("gives the newcomer commands, the one-command compose start, a request, the demo page and saving the overlay in its first 40 lines", () => {
    expect(firstScreen).toContain("npm install && npm start");
    expect(firstScreen).toContain("npm test");
    expect(firstScreen).toContain("docker compose up --build");
    expect(firstScreen).toContain("<!-- curl-example -->");
    expect(firstScreen).toContain("http://localhost:8080/");
    // The overlay command itself, its code block closed, not only its marker.
    expect(firstScreen).toMatch(/<!-- overlay-example -->\n```sh\nnode -e .*overlay\.jpg.*\n```/);
    expect(firstScreen).toMatch(/"object":"palm\.analysis"/); // the expected output, abridged
  });

  it("links the API reference, operations and design documents", () => {
    for (const doc of ["docs/api.md", "docs/operations.md", "docs/design.md"]) expect(readme).toContain(`](${doc})`);
  });
});

describe.each(DOCS)("%s", (doc) => {
  it("links only to files inside the repository that exist", () => {
    const text = read(doc);
    const targets = [...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]).filter((t) => !t.startsWith("#"));
    for (const target of targets) {
      expect(target, `${doc} links outside the repository`).not.toMatch(/^[a-z]+:/i);
      const file = join(root, dirname(doc), target.split("#", 1)[0]);
      expect(file.startsWith(root), `${doc}: ${target} leaves the repository`).toBe(true);
      expect(existsSync(file), `${doc}: ${target} does not exist`).toBe(true);
    }
  });
});

describe("docs/design.md", () => {
  it("draws the request path in the order src/server/request-path.ts takes it", () => {
    const design = read("docs/design.md");
    const diagram = design.slice(design.indexOf("Every request takes one path"), design.indexOf("**One door before any body.**"));
    const code = read("src/server/request-path.ts");
    const body = code.slice(code.indexOf("export function createRequestPath"));
    // Each step as the diagram names it, and the call that takes it in the code.
    const steps: [string, string][] = [
      ["access-log.begin", "accessLog.begin("],
      ["site?", "site(req, res)"],
      ["door.decide", "door\n      .decide("],
      ["refuse", 'verdict.kind === "refuse"'],
      ["connect-refuses", 'verdict.kind === "connect-refuses"'],
      ["rate-gate", "options.limits(res, exchange)"],
      ["widenWindows", "widenWindows(req, windows)"],
      ["rest-handler", "rest.serve("],
    ];
    const order = (text: string, tokens: string[]) => tokens.map((t) => text.indexOf(t));
    const inDiagram = order(
      diagram,
      steps.map(([d]) => d),
    );
    const inCode = order(
      body,
      steps.map(([, c]) => c),
    );
    expect(
      inDiagram.every((i) => i >= 0),
      `diagram: ${steps.map(([d]) => d)}`,
    ).toBe(true);
    expect(
      inCode.every((i) => i >= 0),
      `code: ${steps.map(([, c]) => c)}`,
    ).toBe(true);
    expect(inDiagram).toEqual([...inDiagram].sort((a, b) => a - b));
    // The code's own order: pass() is defined before the handler calls it, so compare within each.
    expect(inCode.slice(3)).toEqual([...inCode.slice(3)].sort((a, b) => a - b));
    const handler = body.slice(body.indexOf("return (req, res) =>"));
    const entry = order(
      handler,
      steps.slice(0, 3).map(([, c]) => c),
    );
    expect(entry).toEqual([...entry].sort((a, b) => a - b));
  });
});
