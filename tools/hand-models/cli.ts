/**
 * build-hand-models converts MediaPipe's palm detector and hand-landmark model from the installed
 * `@mediapipe/hands` package into `models/hands/*.onnx` (our own TFLite -> ONNX converter; nothing
 * is downloaded). Compiled into dist/ by `npm run build` and run from there by `postinstall` and
 * `npm run build:hand-models` (scripts/build-dist.mjs), so that a production install, without
 * tsx, converts too; `--if-missing` keeps existing files.
 *
 *   node dist/tools/hand-models/cli.js [--if-missing] [--out DIR]
 */
import { performance } from "node:perf_hooks";
import { DEFAULT_HAND_MODEL_DIR } from "../../src/landmarks/hand-models.js";
import { buildHandModels } from "./build-hand-models.js";

const args = process.argv.slice(2);
const outAt = args.indexOf("--out");
const modelDir = outAt >= 0 ? args[outAt + 1] : DEFAULT_HAND_MODEL_DIR;
const t0 = performance.now();
try {
  const r = await buildHandModels(modelDir, { force: !args.includes("--if-missing") });
  const ms = Math.round(performance.now() - t0);
  console.log(
    r.built ? `hand models converted in ${ms} ms: ${r.palmPath}, ${r.landmarkPath}` : `hand models already present in ${modelDir}`,
  );
} catch (err) {
  console.error(`build-hand-models: ${(err as Error).message}`);
  process.exit(1);
}
