#!/usr/bin/env node
/**
 * build-dist compiles src/, gen/ and tools/ into dist/ with tsc (tsconfig.build.json,
 * incremental: a few seconds when nothing changed). Run by `postinstall` and `prestart`, so that
 * `npm install && npm start` runs compiled code and `npm start` never runs a stale dist/. Where
 * TypeScript is not installed (`npm ci --omit=dev` after a build), an existing dist/ is kept as
 * it is; `--if-possible` (postinstall) only warns when there is neither, and `npm start` then
 * refuses.
 *
 * `--hand-models` then converts the hand models with the compiled converter
 * (dist/tools/hand-models/cli.js): plain JavaScript, so a production install (no tsx, no
 * TypeScript) converts them too (test/integration/production-install.spec.ts).
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const ifPossible = process.argv.includes("--if-possible");
const converter = join(root, "dist/tools/hand-models/cli.js");

/** run runs a Node script from the package root and exits with its status when it fails. */
function run(args) {
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

let tsc;
try {
  tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
} catch {
  if (!existsSync(join(root, "dist/src/main.js"))) {
    console.error(
      "build-dist: dist/ is missing and typescript is not installed: install the dev dependencies (npm ci) and run npm run build",
    );
    process.exit(ifPossible ? 0 : 1);
  }
  console.log("build-dist: typescript is not installed; keeping the existing dist/");
}
if (tsc) run([tsc, "-p", "tsconfig.build.json"]);
if (process.argv.includes("--hand-models")) {
  if (!existsSync(converter)) {
    console.error("build-dist: dist/ has no hand-model converter: run npm run build with the dev dependencies installed");
    process.exit(ifPossible ? 0 : 1);
  }
  run([converter]);
}
