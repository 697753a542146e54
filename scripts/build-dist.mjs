#!/usr/bin/env node
/**
 * build-dist compiles src/ and gen/ into dist/ with tsc (tsconfig.build.json, incremental: a few
 * seconds when nothing changed). Run by `postinstall` and `prestart`, so that `npm install &&
 * npm start` runs compiled code and `npm start` never runs a stale dist/. Where TypeScript is
 * not installed (`npm ci --omit=dev` after a build), an existing dist/ is kept as it is;
 * `--if-possible` (postinstall) only warns when there is neither, and `npm start` then refuses.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
let tsc;
try {
  tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
} catch {
  if (existsSync(join(root, "dist/src/main.js"))) {
    console.log("build-dist: typescript is not installed; keeping the existing dist/");
    process.exit(0);
  }
  console.error(
    "build-dist: dist/ is missing and typescript is not installed: install the dev dependencies (npm ci) and run npm run build",
  );
  process.exit(process.argv.includes("--if-possible") ? 0 : 1);
}
const r = spawnSync(process.execPath, [tsc, "-p", "tsconfig.build.json"], { cwd: root, stdio: "inherit" });
process.exit(r.status ?? 1);
