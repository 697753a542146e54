/**
 * The outermost interceptor: gives every RPC its request id on the answer, normalises every error
 * into a SPEC.md error (ErrorInfo detail, generic message for faults) and notes it on the
 * request's exchange, which the access log writes (src/server/access-log.ts). An error a server
 * stream ends with, after its first message, is noted the same way.
 */
import type { Interceptor } from "@connectrpc/connect";
import { kExchange, kRequestId } from "../request/context-keys.js";
import { newRequestId, REQUEST_ID_HEADER } from "../request/request-id.js";
import { toPalmError } from "../errors.js";

/** createOutcomeInterceptor returns the request id / error interceptor (place it first). */
export function createOutcomeInterceptor(): Interceptor {
  return (next) => async (req) => {
    const exchange = req.contextValues.get(kExchange);
    const id = req.contextValues.get(kRequestId) ?? newRequestId();
    req.contextValues.set(kRequestId, id);
    const fail = (e: unknown) => {
      if (exchange) return exchange.fail(e);
      const err = toPalmError(e);
      err.metadata.set(REQUEST_ID_HEADER, id);
      return err;
    };
    let res: Awaited<ReturnType<typeof next>>;
    try {
      res = await next(req);
    } catch (e) {
      throw fail(e);
    }
    res.header.set(REQUEST_ID_HEADER, id);
    if (!res.stream) return res;
    const output = res.message;
    const message = (async function* () {
      try {
        yield* output;
      } catch (e) {
        throw fail(e);
      }
    })();
    return { ...res, message } as typeof res;
  };
}
