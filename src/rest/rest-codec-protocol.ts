/**
 * Messages between the REST handler (main thread) and its codec workers. Errors cross the
 * thread boundary as their reason, message and BadRequest field, and are rebuilt on the other side.
 */
import { ConnectError } from "@connectrpc/connect";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { badRequest, isReason, palmError, reasonOf, type Reason } from "../errors.js";

export type CodecRequest =
  | { type: "decode"; id: number; typeName: string; bodyField: string; bytes: Uint8Array }
  | { type: "encode"; id: number; typeName: string; message: unknown };

/** CodecFailure is a serialisable decode/encode failure. */
export interface CodecFailure {
  /** Our error reason when the input was at fault; absent for a bug (internal_error). */
  reason?: Reason;
  message: string;
  /** The BadRequest field violation's field, when there was one. */
  field?: string;
}

export type CodecReply =
  | { id: number; ok: true; message: unknown }
  | { id: number; ok: true; bytes: Uint8Array }
  | { id: number; ok: false; failure: CodecFailure };

/** codecFailure serialises an error thrown by decodeRestBody / encodeRestBody. */
export function codecFailure(e: unknown): CodecFailure {
  if (e instanceof ConnectError) {
    const reason = reasonOf(e);
    if (reason !== undefined) {
      const field = e.findDetails(BadRequestSchema)[0]?.fieldViolations[0]?.field;
      return { reason, message: e.rawMessage, ...(field !== undefined && { field }) };
    }
  }
  return { message: e instanceof Error ? e.message : String(e) };
}

/** codecError rebuilds the error of a {@link CodecFailure} (a plain Error for a bug). */
export function codecError(f: CodecFailure): Error {
  if (f.reason === undefined || !isReason(f.reason)) return new Error(`REST codec: ${f.message}`);
  return f.field !== undefined ? badRequest(f.reason, f.field, f.message) : palmError(f.reason, { message: f.message });
}
