/**
 * Request ids: `palm_` + a ULID (48-bit millisecond time, 80 CSPRNG bits, Crockford base32), so
 * ids sort by time and never collide in practice.
 */
import { randomBytes } from "node:crypto";

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** newRequestId returns a fresh `palm_<ULID>` (31 characters). */
export function newRequestId(now: number = Date.now()): string {
  let time = "";
  let t = now;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const bytes = randomBytes(16);
  let rand = "";
  for (let i = 0; i < 16; i++) rand += CROCKFORD[bytes[i] % 32];
  return `palm_${time}${rand}`;
}

/** REQUEST_ID_HEADER is the response header (and gRPC metadata key) carrying the id. */
export const REQUEST_ID_HEADER = "x-request-id";
