/**
 * The Node flags the server runs with live in one place: package.json's `start` script. Any
 * other launcher (a container's entry point, a test) that leaves one out is told at start-up,
 * instead of having to remember them (test/unit/launch/node-flags.spec.ts). Why each flag is
 * there: docs/decisions/node-flags.md.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../package-root.js";

/** startFlags lists the `--` options before the entry of a `node …` command line. */
export function startFlags(command: string): string[] {
  const [node, ...args] = command.trim().split(/\s+/);
  if (node !== "node") return [];
  const flags: string[] = [];
  for (let i = 0; i < args.length && args[i].startsWith("-"); i++) flags.push(args[i]);
  return flags;
}

/** expectedNodeFlags reads the flags of package.json's `start` script. */
export function expectedNodeFlags(root = PACKAGE_ROOT): string[] {
  const pkg = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { scripts?: { start?: string } };
  return startFlags(pkg.scripts?.start ?? "");
}

/** missingNodeFlags lists the flags of `expected` that `execArgv` lacks. */
export function missingNodeFlags(expected: readonly string[], execArgv: readonly string[] = process.execArgv): string[] {
  return expected.filter((flag) => !execArgv.includes(flag));
}
