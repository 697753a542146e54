/**
 * API key primitives of SPEC.md section 4: format check, generation from a CSPRNG, SHA-256 hashing.
 */
import { createHash, randomBytes } from "node:crypto";
import { API_KEY_PATTERN } from "../config.js";

/** API_KEY_HEADER is the request header (and gRPC metadata key) carrying the key. */
export const API_KEY_HEADER = "x-api-key";

/** isWellFormedApiKey tells whether `key` is `palm_live_` + 32 lowercase hex characters. */
export function isWellFormedApiKey(key: string): boolean {
  return API_KEY_PATTERN.test(key);
}

/** generateApiKey returns a new key from 16 CSPRNG bytes. */
export function generateApiKey(): string {
  return `palm_live_${randomBytes(16).toString("hex")}`;
}

/** hashApiKey is the SHA-256 hex digest of the whole key string: the only form ever stored. */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

/** keyHashOf is the hash of the well-formed key in `header`, or undefined when there is none (the key check says why). */
export function keyHashOf(header: Headers): string | undefined {
  const key = header.get(API_KEY_HEADER);
  return key !== null && isWellFormedApiKey(key) ? hashApiKey(key) : undefined;
}
