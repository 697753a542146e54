/**
 * The image and inference layers' errors, defined in src/api/engine-errors.ts (the error table
 * maps them and may not depend on this layer); re-exported here for the engine's modules.
 */
export {
  IMAGE_ERROR_CODES,
  ImageError,
  isImageError,
  isOverloadedError,
  OverloadedError,
  type ImageErrorCode,
} from "../api/engine-errors.js";
