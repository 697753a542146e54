/**
 * Request options in the REST query string (`POST /v1/palm/analyze?images=none&max_overlay_side=512`),
 * for every body form: a multipart or raw image upload has no JSON to carry them. A parameter
 * named after a string, bool or 32-bit integer field of the request (proto or JSON name) sets that
 * field, over the body's value; other parameters are ignored, as unknown JSON fields are.
 * test/integration/lean-answers.spec.ts pins it.
 */
import { ScalarType, type DescField, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { badRequest } from "../errors.js";

const UINT32 = new Set([ScalarType.UINT32, ScalarType.FIXED32]);
const INT32 = new Set([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32]);

/** applyQuery sets the fields of `msg` named in `url`'s query; throws invalid_option for a value of the wrong type. */
export function applyQuery<Desc extends DescMessage>(desc: Desc, msg: MessageShape<Desc>, url: string | undefined): MessageShape<Desc> {
  const q = url?.indexOf("?") ?? -1;
  if (q < 0) return msg;
  const target = msg as Record<string, unknown>;
  for (const [name, value] of new URLSearchParams(url!.slice(q + 1))) {
    const field = desc.fields.find((f) => f.name === name || f.jsonName === name);
    if (field?.fieldKind !== "scalar") continue;
    const parsed = scalarOf(field, value);
    if (parsed !== undefined) target[field.localName] = parsed;
  }
  return msg;
}

function scalarOf(field: DescField & { fieldKind: "scalar" }, value: string): string | number | boolean | undefined {
  const t = field.scalar;
  if (t === ScalarType.STRING) return value;
  if (t === ScalarType.BOOL) {
    if (value === "true" || value === "false") return value === "true";
    throw badRequest("invalid_option", field.name, `${field.name} must be true or false.`);
  }
  if (UINT32.has(t) || INT32.has(t)) {
    const n = /^-?\d{1,10}$/.test(value) ? Number(value) : Number.NaN;
    const [min, max] = UINT32.has(t) ? [0, 2 ** 32 - 1] : [-(2 ** 31), 2 ** 31 - 1];
    if (!Number.isInteger(n) || n < min || n > max) {
      throw badRequest("invalid_option", field.name, `${field.name} must be a whole number from ${min} to ${max}.`);
    }
    return n;
  }
  return undefined; // bytes, 64-bit and floating-point fields are not options
}
