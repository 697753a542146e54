/**
 * The repository's root folder, found the same way whether this file runs as `src/*.ts` (tsx,
 * vitest) or compiled as `dist/src/*.js`: the nearest folder above with a package.json. Models,
 * the demo page and gen/openapi are read from there, never from dist/
 * (test/integration/dist-start.spec.ts starts the compiled server).
 */
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

function findPackageRoot(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    if (existsSync(join(dir, "package.json"))) return dir;
    if (dirname(dir) === dir) throw new Error(`no package.json above ${from}`);
  }
}

/** PACKAGE_ROOT is the absolute path of the folder holding package.json. */
export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));
