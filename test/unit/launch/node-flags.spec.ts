import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { expectedNodeFlags, missingNodeFlags, startFlags } from "../../../src/launch/node-flags.js";

describe("Node flags of npm start", () => {
  it("reads the options before the entry of a node command", () => {
    expect(startFlags("node --initial-old-space-size=96 dist/src/main.js")).toEqual(["--initial-old-space-size=96"]);
    expect(startFlags("node  --a --b=1 dist/x.js --c")).toEqual(["--a", "--b=1"]);
    expect(startFlags("node dist/src/main.js")).toEqual([]);
    expect(startFlags("tsx src/main.ts")).toEqual([]);
  });

  it("takes them from package.json's start script, which runs the compiled server", () => {
    expect(expectedNodeFlags()).toEqual(["--initial-old-space-size=96"]);
    const dir = mkdtempSync(join(tmpdir(), "flags-"));
    writeFileSync(join(dir, "package.json"), JSON.stringify({ scripts: { start: "node --x --y dist/a.js" } }));
    expect(expectedNodeFlags(dir)).toEqual(["--x", "--y"]);
  });

  it("names the flags a launcher left out", () => {
    expect(missingNodeFlags(["--a", "--b"], ["--b", "--import", "tsx"])).toEqual(["--a"]);
    expect(missingNodeFlags(["--a"], ["--a"])).toEqual([]);
  });
});
