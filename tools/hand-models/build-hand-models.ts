/**
 * Building the hand models: finds MediaPipe's palm-detector and hand-landmark TFLite models in
 * the installed npm package `@mediapipe/hands` (the palm detectors are packed in
 * `hands_solution_packed_assets.data`), converts them to ONNX with our own converter
 * (tflite-to-onnx.ts) and writes them where the server reads them (src/landmarks/hand-models.ts).
 * A build tool, run at `npm install` (cli.ts); nothing is downloaded.
 */
import { createHash } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, rename, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import {
  DEFAULT_HAND_MODEL_DIR,
  HAND_MODEL_CONVERTER_VERSION,
  HAND_MODEL_FILES,
  HandModelError,
  LANDMARK_OUTPUTS,
  PALM_OUTPUTS,
} from "../../src/landmarks/hand-models.js";
import { isTflite, readTflite } from "./tflite-reader.js";
import { convertTfliteToOnnx } from "./tflite-to-onnx.js";

/** HandSources are the TFLite files of `@mediapipe/hands`, as bytes. */
export interface HandSources {
  packageDir: string;
  packageVersion: string;
  palmDetectionFull: Uint8Array;
  palmDetectionLite: Uint8Array;
  handLandmarkFull: Uint8Array;
  handLandmarkLite: Uint8Array;
  /** Labels of the handedness output, from `handedness.txt`: ["Left", "Right"]. */
  handednessLabels: string[];
}

/** locateMediapipeHands returns the folder of the installed `@mediapipe/hands` package. */
export function locateMediapipeHands(): string {
  try {
    return dirname(createRequire(import.meta.url).resolve("@mediapipe/hands/package.json"));
  } catch (cause) {
    throw new HandModelError("The npm package @mediapipe/hands is not installed (run npm install).", { cause });
  }
}

interface PackedFile {
  filename: string;
  start: number;
  end: number;
}

/**
 * packedFiles reads the file table of `hands_solution_packed_assets.data` from the
 * `loadPackage({...})` call in the package's loader script.
 */
function packedFiles(packageDir: string): PackedFile[] {
  const loader = readFileSync(join(packageDir, "hands_solution_packed_assets_loader.js"), "utf8");
  const m = /loadPackage\((\{"files":.*?\]\s*,\s*"remote_package_size":\s*\d+\s*\})\)/s.exec(loader);
  if (!m) throw new HandModelError("Cannot find the packed-asset table in hands_solution_packed_assets_loader.js");
  return (JSON.parse(m[1]) as { files: PackedFile[] }).files;
}

/**
 * readHandSources reads the four TFLite models and the handedness labels from the installed
 * package, checking each model's `TFL3` identifier. Throws {@link HandModelError}.
 */
export function readHandSources(packageDir: string = locateMediapipeHands()): HandSources {
  const pkg = JSON.parse(readFileSync(join(packageDir, "package.json"), "utf8")) as { version: string };
  const packed = readFileSync(join(packageDir, "hands_solution_packed_assets.data"));
  const files = packedFiles(packageDir);
  const part = (suffix: string): Uint8Array => {
    const f = files.find((x) => x.filename.endsWith(suffix));
    if (!f || f.end > packed.length || f.start >= f.end) throw new HandModelError(`${suffix} is not in the packed assets`);
    return packed.subarray(f.start, f.end);
  };
  const model = (bytes: Uint8Array, what: string): Uint8Array => {
    if (!isTflite(bytes)) throw new HandModelError(`${what} is not a TFLite flatbuffer (no TFL3 identifier)`);
    return bytes;
  };
  return {
    packageDir,
    packageVersion: pkg.version,
    palmDetectionFull: model(part("/palm_detection_full.tflite"), "palm_detection_full.tflite"),
    palmDetectionLite: model(part("/palm_detection_lite.tflite"), "palm_detection_lite.tflite"),
    handLandmarkFull: model(readFileSync(join(packageDir, "hand_landmark_full.tflite")), "hand_landmark_full.tflite"),
    handLandmarkLite: model(readFileSync(join(packageDir, "hand_landmark_lite.tflite")), "hand_landmark_lite.tflite"),
    handednessLabels: new TextDecoder().decode(part("/handedness.txt")).split("\n").filter(Boolean),
  };
}

async function writeAtomically(path: string, bytes: Uint8Array): Promise<void> {
  const tmp = `${path}.${process.pid}.${Date.now()}.tmp`;
  await writeFile(tmp, bytes);
  await rename(tmp, path);
}

/** BuiltHandModels says where the converted models are. */
export interface BuiltHandModels {
  palmPath: string;
  landmarkPath: string;
  /** True when this call converted them (false when they were already there). */
  built: boolean;
}

/**
 * buildHandModels converts the full palm detector and the full hand-landmark model of the
 * installed `@mediapipe/hands` into ONNX files in `modelDir` (written atomically, so that
 * concurrent workers never read half a file). With `force: false` (the default) existing files
 * are kept. Throws {@link HandModelError} or a conversion error.
 */
export async function buildHandModels(
  modelDir: string = DEFAULT_HAND_MODEL_DIR,
  options: { force?: boolean } = {},
): Promise<BuiltHandModels> {
  const palmPath = join(modelDir, HAND_MODEL_FILES.palm);
  const landmarkPath = join(modelDir, HAND_MODEL_FILES.landmark);
  if (!options.force && existsSync(palmPath) && existsSync(landmarkPath)) return { palmPath, landmarkPath, built: false };
  const src = readHandSources();
  const meta = (bytes: Uint8Array, file: string): Record<string, string> => ({
    source: `@mediapipe/hands@${src.packageVersion}/${file}`,
    source_sha256: createHash("sha256").update(bytes).digest("hex"),
    license: "Apache-2.0 (MediaPipe, Google LLC); see models/hands/README.md",
    converter_version: HAND_MODEL_CONVERTER_VERSION,
  });
  const palm = convertTfliteToOnnx(readTflite(src.palmDetectionFull), {
    graphName: "palm_detection_full",
    outputNames: [...PALM_OUTPUTS],
    metadata: meta(src.palmDetectionFull, "palm_detection_full.tflite"),
  });
  const landmark = convertTfliteToOnnx(readTflite(src.handLandmarkFull), {
    graphName: "hand_landmark_full",
    outputNames: [...LANDMARK_OUTPUTS],
    metadata: { ...meta(src.handLandmarkFull, "hand_landmark_full.tflite"), handedness_labels: src.handednessLabels.join(",") },
  });
  await mkdir(modelDir, { recursive: true });
  await writeAtomically(palmPath, palm);
  await writeAtomically(landmarkPath, landmark);
  return { palmPath, landmarkPath, built: true };
}
