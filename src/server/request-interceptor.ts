/**
 * The outermost interceptor: gives every RPC its request id, normalises every error into a
 * SPEC.md error (ErrorInfo detail, generic message for faults) and writes one structured log line.
 */
import { Code, type Interceptor } from "@connectrpc/connect";
import { httpStatusOf, reasonOf, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import { kPrincipal, kProtocol, kRequestId } from "../api/context-keys.js";
import { protocolOf } from "../api/http.js";
import { newRequestId, REQUEST_ID_HEADER } from "../api/request-id.js";

/** RequestInterceptorOptions configure {@link createRequestInterceptor}. */
export interface RequestInterceptorOptions {
  logger: Logger;
}

/** createRequestInterceptor returns the request id / error / log interceptor (place it first). */
export function createRequestInterceptor(options: RequestInterceptorOptions): Interceptor {
  const { logger } = options;
  return (next) => async (req) => {
    const start = performance.now();
    const id = req.contextValues.get(kRequestId) ?? newRequestId();
    req.contextValues.set(kRequestId, id);
    const protocol = req.contextValues.get(kProtocol) ?? protocolOf(req.header);
    const line = () => {
      const p = req.contextValues.get(kPrincipal);
      return {
        request_id: id,
        protocol,
        method: `${req.service.typeName}/${req.method.name}`,
        client_id: p?.clientId,
        key_hint: p?.keyHint,
        latency_ms: Math.round((performance.now() - start) * 10) / 10,
      };
    };
    try {
      const res = await next(req);
      res.header.set(REQUEST_ID_HEADER, id);
      logger.info({ ...line(), status: 200, code: "ok" }, "request");
      return res;
    } catch (e) {
      const err = toPalmError(e);
      err.metadata.set(REQUEST_ID_HEADER, id);
      const status = httpStatusOf(err);
      const reason = reasonOf(err) ?? "internal_error";
      if (reason === "internal_error") {
        // Faults are logged with their cause (server side only; clients get ERRORS[...].message).
        logger.error({ ...line(), status, code: reason, err: err.cause ?? err }, "request failed");
      } else if (status >= 500 && err.code !== Code.Canceled) {
        // Expected 5xx (overload, store down, timeout): one line without a stack, so load does not flood the log.
        logger.warn({ ...line(), status, code: reason, cause: String((err.cause as Error)?.message ?? "") }, "request failed");
      } else {
        logger.info({ ...line(), status: err.code === Code.Canceled ? 499 : status, code: reason }, "request");
      }
      throw err;
    }
  };
}
