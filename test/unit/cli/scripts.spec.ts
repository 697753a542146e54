import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { lineTable } from "../../../scripts/eval-boxes.js";

/** script runs one measuring script as `npm run` does, and answers its exit status and output. */
function script(file: string, ...args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--import", "tsx", file, ...args], { encoding: "utf8", timeout: 60_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("the measuring scripts' flags", () => {
  it("eval:boxes --help prints its usage and exits 0 before reading any photo", () => {
    const r = script("scripts/eval-boxes.ts", "--help");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run eval:boxes/);
    for (const flag of ["--part", "--model", "--detail", "--turned", "--degrade", "--versus"]) expect(r.stdout).toContain(flag);
  });

  it("eval:boxes answers an unknown flag or part with one reason and the usage, exit 2, no stack trace", () => {
    for (const [args, reason] of [
      [["--bogus"], "Unknown option '--bogus'"],
      [["--part", "nope"], "--part is one of eval, heldout, train, not 'nope'"],
      [["--versus"], "--versus compares a degraded photo with the photo as is: give --degrade too"],
    ] as const) {
      const r = script("scripts/eval-boxes.ts", ...args);
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n")[0]).toBe(reason);
      expect(r.stderr).toContain("usage: npm run eval:boxes");
      expect(r.stderr).not.toMatch(/^\s+at /m);
      expect(r.stdout).toBe("");
    }
  });

  it("eval:real --help prints its usage and an unknown flag exits 2", () => {
    const help = script("scripts/eval-real.ts", "-h");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: npm run eval:real/);
    const bad = script("scripts/eval-real.ts", "--modle", "x.onnx");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("Unknown option '--modle'");
    expect(bad.stderr).not.toMatch(/^\s+at /m);
  });

  it("closeup-frames and trait-scales refuse the evaluation quarter and an unknown part, exit 2, before reading any photo", () => {
    for (const [file, args, reason] of [
      ["scripts/closeup-frames.ts", ["--part", "eval"], "closeup-frames: the evaluation quarter is read by eval:boxes only"],
      ["scripts/closeup-frames.ts", ["--part", "held-out"], "--part is one of heldout, train, not 'held-out'"],
      ["scripts/closeup-frames.ts", ["--degrade", "blur"], "--degrade is one of tight, closeup, not 'blur'"],
      ["scripts/trait-scales.ts", ["--part", "eval"], "trait-scales: the evaluation quarter is not for choosing scales"],
      ["scripts/trait-scales.ts", ["--part", "test"], "--part is one of heldout, train, not 'test'"],
    ] as const) {
      const r = script(file, ...args);
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n")[0]).toBe(reason);
      expect(r.stderr).not.toMatch(/^\s+at /m);
      expect(r.stdout).toBe("");
    }
  });
});

describe("eval:boxes' table", () => {
  it("ends with the three lines together: agreeing of all labelled, drawn wrong, not detected", () => {
    const rows = lineTable(
      { heart: 283, head: 277, life: 276 },
      { heart: 0, head: 6, life: 7 },
      { heart: 284, head: 284, life: 283 },
      { heart: [0.034, 0.03, 0.036], head: [0.03], life: [] },
    );
    expect(rows.map((r) => r.split(/\s+/)[0])).toEqual(["line", "heart", "head", "life", "lines"]);
    expect(rows[1].split(/\s+/)).toEqual(["heart", "283/284", "99.6%", "0", "1", "3.4%"]);
    expect(rows[3].split(/\s+/)).toEqual(["life", "276/283", "97.5%", "7", "0", "-"]);
    expect(rows[4].split(/\s+/)).toEqual(["lines", "836/851", "98.2%", "13", "2", "-"]);
  });
});
