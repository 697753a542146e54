/**
 * Finding a Chromium for the browser tests: $CHROMIUM_PATH, else Debian's `chromium` (what
 * .ci/run installs), else other usual names on PATH. playwright-core drives it; it never
 * downloads a browser of its own.
 */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

const NAMES = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];

/** findChromium returns the browser's path, or undefined with the reason in `why`. */
export function findChromium(env: NodeJS.ProcessEnv = process.env): { path?: string; why: string } {
  const candidates = env.CHROMIUM_PATH ? [env.CHROMIUM_PATH] : [];
  for (const dir of (env.PATH ?? "").split(delimiter).filter(Boolean)) for (const n of NAMES) candidates.push(join(dir, n));
  for (const c of candidates) {
    try {
      accessSync(c, constants.X_OK);
      return { path: c, why: "" };
    } catch {
      // next
    }
  }
  return {
    why: `no Chromium found (looked for $CHROMIUM_PATH and ${NAMES.join(", ")} on PATH); install Debian's package: apt-get install chromium`,
  };
}
