import { spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import sharp from "sharp";
import { BOX_DIR, partOf } from "../../../scripts/box-set.js";
import { wrongLines } from "../../../scripts/draw-wrong.js";
import { grownBox, lineTable } from "../../../scripts/eval-boxes.js";

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

describe("draw:wrong", () => {
  // Rows as eval:boxes --detail prints them (scripts/eval-boxes.ts, the row of each photo).
  const rows = [
    "model m; box set part 'train', 2 photos",
    "FIMG_0351.jpg                lines; heart AGREES in 100% iou 0.52 conf 0.912 len 0.98; head - (low_confidence); life WRONG in 70% iou 0.31 conf 0.871 len 1.10",
    "IMG_0258.jpg                 lines; heart WRONG in 96% iou 0.20 conf 0.850 len 0.70; head AGREES in 99% iou 0.40 conf 0.9 len 1.0",
    "",
    "palm found: 2/2 (100.0%), 0 of them read as the back of a hand; mean engine time 90 ms",
  ].join("\n");

  it("reads the lines a --detail read calls WRONG, and no other", () => {
    expect(wrongLines(rows)).toEqual([
      { file: "FIMG_0351.jpg", line: "life", said: "WRONG in 70% iou 0.31 conf 0.871 len 1.10" },
      { file: "IMG_0258.jpg", line: "heart", said: "WRONG in 96% iou 0.20 conf 0.850 len 0.70" },
    ]);
  });

  it("grows a box as the agreement rule does: 15% of its diagonal, at least 8 px", () => {
    expect(grownBox([100, 100, 400, 500])).toEqual([25, 25, 475, 575]);
    expect(grownBox([100, 100, 110, 110])).toEqual([92, 92, 118, 118]);
  });

  it("refuses a read of the evaluation quarter before drawing anything, exit 2", () => {
    const dir = mkdtempSync(join(tmpdir(), "draw-wrong-"));
    // A name of the evaluation quarter: its SHA-256 starts 0-3 (scripts/box-set.ts partOf).
    const name = Array.from({ length: 50 }, (_, i) => `q${i}.jpg`).find((f) => partOf(f) === "eval")!;
    writeFileSync(join(dir, "detail.txt"), `${name} lines; life WRONG in 10% iou 0.01 conf 0.9 len 1.0\n`);
    const r = script("scripts/draw-wrong.ts", "--detail", join(dir, "detail.txt"), "--out", join(dir, "out"));
    expect(r.code).toBe(2);
    expect(r.stderr.split("\n")[0]).toBe("draw:wrong: the evaluation quarter is scored by eval:boxes only, never drawn line by line");
    expect(existsSync(join(dir, "out"))).toBe(false);
  });

  it.skipIf(!existsSync(join(BOX_DIR, "boxes.csv")))(
    "draws a training photo's wrong line beside the photo as it is",
    async () => {
      const dir = mkdtempSync(join(tmpdir(), "draw-wrong-"));
      writeFileSync(join(dir, "detail.txt"), rows);
      const r = script("scripts/draw-wrong.ts", "--detail", join(dir, "detail.txt"), "--out", join(dir, "out"));
      expect(r.code).toBe(0);
      // Each line drawn, or said why not (the released model may now read it otherwise).
      expect(r.stdout.trim().split("\n")).toHaveLength(2);
      for (const png of readdirSync(join(dir, "out"))) {
        const { width = 0, height = 0 } = await sharp(join(dir, "out", png)).metadata();
        // Two panels of one crop side by side, 8 px apart.
        expect((width - 8) % 2).toBe(0);
        expect(height).toBeGreaterThan(50);
      }
      expect(readdirSync(join(dir, "out")).length).toBeGreaterThan(0);
    },
    60_000,
  );
});
