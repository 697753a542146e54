/**
 * Binary uploads on REST (SPEC.md section 9): beside the JSON body, the image may come as the
 * file part `image` of a `multipart/form-data` body or as the whole body with `Content-Type:
 * image/jpeg` or `image/png`. Either way the bytes are taken as they stream in, never through
 * base64, under the same 5 MiB image limit: a multipart image part is refused (413) as soon as it
 * crosses it, a second image part (400) as soon as its headers arrive. The declared type is only
 * a route to this reader; the format is still recognised from the bytes (SPEC.md section 2).
 * test/integration/uploads.spec.ts pins it.
 */
import { create, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { MAX_BODY_BYTES, MAX_IMAGE_BYTES } from "../limits.js";
import { badRequest, palmError } from "../errors.js";
import { isJsonContentType } from "./rest-body.js";

/** RestBodyKind is how a REST body carries its request: SPEC.md's JSON, a multipart form, or the image itself. */
export type RestBodyKind = "json" | "multipart" | "image";

/** UPLOAD_FIELD is the request field (and the multipart part name) that binary uploads fill. */
export const UPLOAD_FIELD = "image";

/** MAX_PART_HEADER_BYTES bounds the header block of one multipart part. */
const MAX_PART_HEADER_BYTES = 16 * 1024;

/** restBodyKindOf classifies a Content-Type; undefined when the API does not take it (415). */
export function restBodyKindOf(contentType: string | undefined): RestBodyKind | undefined {
  if (contentType === undefined) return undefined;
  if (isJsonContentType(contentType)) return "json";
  const type = contentType.split(";", 1)[0].trim().toLowerCase();
  if (type === "multipart/form-data") return "multipart";
  if (type === "image/jpeg" || type === "image/png") return "image";
  return undefined;
}

/** bodyLimitOf is the byte limit of a body of `kind`: the image limit for a raw image, else the body limit. */
export function bodyLimitOf(kind: RestBodyKind, bodyLimitBytes = MAX_BODY_BYTES): number {
  return kind === "image" ? Math.min(MAX_IMAGE_BYTES, bodyLimitBytes) : bodyLimitBytes;
}

/** uploadMessage is the request message of an uploaded image: `image` set, every other field at its default. */
export function uploadMessage<Desc extends DescMessage>(desc: Desc, image: Uint8Array): MessageShape<Desc> {
  const field = desc.fields.find((f) => f.name === UPLOAD_FIELD);
  if (field?.fieldKind !== "scalar") throw palmError("unsupported_media_type");
  return create(desc, { [field.localName]: image } as never);
}

/** MultipartImageReader takes a multipart/form-data body chunk by chunk and keeps its `image` part. */
export interface MultipartImageReader {
  /** push takes the next chunk; throws our error as soon as the body is known to be wrong. */
  push(chunk: Buffer): void;
  /** end is called once the body ended: the image bytes, or our error. */
  end(): Uint8Array;
}

/**
 * createMultipartImageReader reads a multipart/form-data body (RFC 7578) whose Content-Type is
 * `contentType`. Parts other than `image` are skipped (as unknown JSON fields are ignored); the
 * `image` part's declared type and file name are not used.
 */
export function createMultipartImageReader(contentType: string, maxImageBytes = MAX_IMAGE_BYTES): MultipartImageReader {
  const boundary = boundaryOf(contentType);
  // The body is read as if it began with CRLF, so that the first delimiter looks like every other one.
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let pending: Buffer = Buffer.from("\r\n");
  let state: "preamble" | "after-delimiter" | "headers" | "part" | "done" = "preamble";
  let inImage = false;
  let imageParts = 0;
  let imageChunks: Buffer[] = [];
  let imageBytes = 0;

  const takePart = (data: Buffer) => {
    if (!inImage || data.byteLength === 0) return;
    imageBytes += data.byteLength;
    if (imageBytes > maxImageBytes) throw badRequest("image_too_large", UPLOAD_FIELD);
    imageChunks.push(data);
  };

  function step(): boolean {
    switch (state) {
      case "preamble":
      case "part": {
        const at = pending.indexOf(delimiter);
        if (at < 0) {
          // Keep what could be the start of a delimiter split across chunks.
          const keep = Math.min(pending.byteLength, delimiter.byteLength - 1);
          if (state === "part") takePart(pending.subarray(0, pending.byteLength - keep));
          pending = pending.subarray(pending.byteLength - keep);
          return false;
        }
        if (state === "part") takePart(pending.subarray(0, at));
        pending = pending.subarray(at + delimiter.byteLength);
        inImage = false;
        state = "after-delimiter";
        return true;
      }
      case "after-delimiter": {
        if (pending.byteLength < 2) return false;
        if (pending[0] === 0x2d && pending[1] === 0x2d) {
          state = "done"; // "--": the close delimiter; the epilogue is ignored
          pending = Buffer.alloc(0);
          return false;
        }
        // RFC 2046 allows linear white space after a delimiter, before its CRLF.
        const eol = pending.indexOf("\r\n");
        if (eol < 0) {
          if (pending.byteLength > 256) throw invalidMultipart("A boundary line is malformed.");
          return false;
        }
        if (pending.subarray(0, eol).toString("latin1").trim() !== "") throw invalidMultipart("A boundary line is malformed.");
        pending = pending.subarray(eol + 2);
        state = "headers";
        return true;
      }
      case "headers": {
        if (pending.byteLength < 2) return false;
        let headers = "";
        if (pending[0] === 0x0d && pending[1] === 0x0a) {
          pending = pending.subarray(2); // a part without headers
        } else {
          const end = pending.indexOf("\r\n\r\n");
          if (end < 0) {
            if (pending.byteLength > MAX_PART_HEADER_BYTES) throw invalidMultipart("A part's headers are too long.");
            return false;
          }
          headers = pending.subarray(0, end).toString("latin1");
          pending = pending.subarray(end + 4);
        }
        inImage = partNameOf(headers) === UPLOAD_FIELD;
        if (inImage && ++imageParts > 1) {
          throw badRequest("missing_image", UPLOAD_FIELD, `The form has more than one "${UPLOAD_FIELD}" part; send exactly one.`);
        }
        // The part's bytes run up to the next delimiter, whose leading CRLF is not part of them.
        state = "part";
        return true;
      }
      case "done":
        return false;
    }
  }

  return {
    push(chunk) {
      if (state === "done") return;
      pending = pending.byteLength === 0 ? chunk : Buffer.concat([pending, chunk]);
      while (step()) {}
    },
    end() {
      if (state !== "done") throw invalidMultipart("The form ended before its closing boundary.");
      if (imageParts === 0) {
        throw badRequest(
          "missing_image",
          UPLOAD_FIELD,
          `The form has no "${UPLOAD_FIELD}" part; send the photo as the file part "${UPLOAD_FIELD}".`,
        );
      }
      const image = Buffer.concat(imageChunks, imageBytes);
      imageChunks = [];
      if (image.byteLength === 0) throw badRequest("missing_image", UPLOAD_FIELD, `The "${UPLOAD_FIELD}" part is empty.`);
      return image;
    },
  };
}

function invalidMultipart(message: string): Error {
  return palmError("invalid_multipart", { message });
}

/** boundaryOf reads the boundary parameter (RFC 2046: 1-70 characters, possibly quoted). */
function boundaryOf(contentType: string): string {
  const m = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i.exec(contentType);
  const boundary = m?.[1] ?? m?.[2];
  if (boundary === undefined) throw invalidMultipart("The multipart/form-data Content-Type has no boundary parameter.");
  return boundary;
}

/** partNameOf reads the `name` of a part's Content-Disposition: form-data header. */
function partNameOf(headers: string): string | undefined {
  for (const line of headers.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon < 0 || line.slice(0, colon).trim().toLowerCase() !== "content-disposition") continue;
    const m = /;\s*name\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;]+))/i.exec(line.slice(colon + 1));
    if (!m) return undefined;
    return m[1] !== undefined ? m[1].replace(/\\(.)/g, "$1") : m[2];
  }
  throw invalidMultipart("A part has no Content-Disposition header.");
}
