/**
 * Size limits of SPEC.md section 2, defined once for every layer.
 */

/** MAX_BODY_BYTES is the largest request body (REST) or request message (RPC): 8 MiB. */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

/** MAX_IMAGE_BYTES is the largest image file, once decoded from base64 or taken from the message: 5 MiB. */
export const MAX_IMAGE_BYTES = 5 * 1024 * 1024;
