/**
 * Hand models at run time: where the converted ONNX models lie and what their outputs are named.
 * They are made from MediaPipe's TFLite models at `npm install` by a build tool
 * (tools/hand-models/build-hand-models.ts, `npm run build:hand-models`); the server never
 * converts.
 */
import { join } from "node:path";
import { PACKAGE_ROOT } from "../package-root.js";

/** DEFAULT_HAND_MODEL_DIR is `models/hands/`, resolved relative to the repository root. */
export const DEFAULT_HAND_MODEL_DIR = join(PACKAGE_ROOT, "models/hands");

/** HAND_MODEL_FILES names the converted models inside the model folder. */
export const HAND_MODEL_FILES = Object.freeze({
  palm: "palm_detection_full.onnx",
  landmark: "hand_landmark_full.onnx",
});

/** PALM_OUTPUTS and LANDMARK_OUTPUTS are the ONNX output names we give the converted models. */
export const PALM_OUTPUTS = Object.freeze(["boxes", "scores"] as const);
/** LANDMARK_OUTPUTS: 21x3 landmarks (crop pixels), hand presence, handedness, 21x3 world landmarks (metres). */
export const LANDMARK_OUTPUTS = Object.freeze(["landmarks", "presence", "handedness", "world_landmarks"] as const);

/** Version of our conversion; bump it when the converter's output changes. */
export const HAND_MODEL_CONVERTER_VERSION = "1";

/** HandModelError is thrown when the models (or, when building them, their sources) are missing or not what we expect. */
export class HandModelError extends Error {
  override name = "HandModelError";
}
