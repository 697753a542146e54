import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

/** script runs one measuring script as `npm run` does, and answers its exit status and output. */
async function script(file: string, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", file, ...args], { timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe("the measuring scripts' flags", () => {
  it("eval:boxes --help prints its usage and exits 0 before reading any photo", async () => {
    const r = await script("scripts/eval-boxes.ts", "--help");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run eval:boxes/);
    for (const flag of ["--part", "--model", "--detail", "--turned", "--degrade"]) expect(r.stdout).toContain(flag);
  });

  it("eval:boxes answers an unknown flag or part with one reason and the usage, exit 2, no stack trace", async () => {
    for (const [args, reason] of [
      [["--bogus"], "Unknown option '--bogus'"],
      [["--part", "nope"], "--part is one of eval, heldout, train, not 'nope'"],
    ] as const) {
      const r = await script("scripts/eval-boxes.ts", ...args);
      expect(r.code).toBe(2);
      expect(r.stderr.split("\n")[0]).toBe(reason);
      expect(r.stderr).toContain("usage: npm run eval:boxes");
      expect(r.stderr).not.toMatch(/^\s+at /m);
      expect(r.stdout).toBe("");
    }
  });

  it("eval:real --help prints its usage and an unknown flag exits 2", async () => {
    const help = await script("scripts/eval-real.ts", "-h");
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/^usage: npm run eval:real/);
    const bad = await script("scripts/eval-real.ts", "--modle", "x.onnx");
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain("Unknown option '--modle'");
    expect(bad.stderr).not.toMatch(/^\s+at /m);
  });
});
