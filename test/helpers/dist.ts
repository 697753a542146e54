/**
 * The compiled tree for tests that run what production runs (`npm start`, `npx palmctl`): built
 * from the current sources first, so that a test never runs a stale dist/.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";

const root = new URL("../../", import.meta.url).pathname;

/** buildDist runs `npm run build` (incremental tsc: seconds when dist/ is current). */
export async function buildDist(): Promise<void> {
  await promisify(execFile)(process.execPath, ["scripts/build-dist.mjs"], { cwd: root });
}
