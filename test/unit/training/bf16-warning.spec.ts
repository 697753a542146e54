/**
 * `--bf16` is a gain only where the CPU computes in bfloat16; elsewhere a step took 11x float32's
 * (docs/decisions/bf16-training.md), so training/model.py warns before such a run is under way.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { PYTHON, pythonImports, repoRoot } from "../../helpers/python.js";

const hasTorch = pythonImports("bf16 warning", ["torch"]);

/** flagsSay runs model.native_bf16 on a cpuinfo whose flags line is `flags`. */
function flagsSay(flags: string): string {
  const dir = mkdtempSync(join(tmpdir(), "cpuinfo-"));
  const file = join(dir, "cpuinfo");
  writeFileSync(file, `processor\t: 0\nflags\t\t: ${flags}\n`);
  const run = spawnSync(PYTHON, ["-c", `from training.model import native_bf16; print(native_bf16(${JSON.stringify(file)}))`], {
    cwd: repoRoot,
    encoding: "utf8",
  });
  expect(run.stderr).not.toMatch(/Traceback/);
  return run.stdout.trim();
}

describe.skipIf(!hasTorch)("training/model.py native_bf16", () => {
  it("tells a CPU that computes in bfloat16 from one that would emulate it", () => {
    expect(flagsSay("fpu sse avx avx2 fma f16c")).toBe("False");
    expect(flagsSay("fpu avx2 avx512f avx512_bf16")).toBe("True");
    expect(flagsSay("fpu avx2 amx_bf16 amx_tile")).toBe("True");
  }, 60_000);
});
