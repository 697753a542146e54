/**
 * The access log: one place, at the HTTP layer, that writes one log line and one count for every
 * answer, in the manner of pino-http: the request's {@link Exchange} begins when it arrives and is
 * written when its response closes, whatever answered it (the door's refusals, 404 and 405,
 * connect's own errors, the service), with the caller's protocol. A client that leaves first is
 * written at once as canceled (499). test/integration/access-log.spec.ts pins it.
 */
import { Code, type ConnectError, createContextValues } from "@connectrpc/connect";
import { type Exchange, kExchange, kPrincipal, kRequestId, type Principal } from "../request/context-keys.js";
import { pathOf, type NodeRequest, type NodeResponse } from "../wire/http.js";
import { newRequestId, REQUEST_ID_HEADER } from "../request/request-id.js";
import { httpStatusOf, palmError, reasonOf, toPalmError } from "../errors.js";
import type { Logger } from "../log.js";
import type { RequestCounter } from "../ops/metrics.js";

/** UNMATCHED is the procedure label of an answer no RPC was routed to (404, 405, headers never received). */
export const UNMATCHED = "unmatched";

/** AccessLogOptions configure {@link createAccessLog}. */
export interface AccessLogOptions {
  logger: Logger;
  /** Counts and times every API answer (src/ops/metrics.ts). Default: none. */
  counter?: RequestCounter;
}

/** AccessLog begins every request's exchange and writes it when its response closes. */
export interface AccessLog {
  /** begin starts `req`'s exchange: a request id, a child logger, the close signal. */
  begin(req: NodeRequest, res: NodeResponse): Exchange;
  /** headersTimedOut writes a connection whose request headers never came and returns its `timeout` error. */
  headersTimedOut(): ConnectError;
}

/** createAccessLog returns the {@link AccessLog}. */
export function createAccessLog(options: AccessLogOptions): AccessLog {
  const { logger, counter } = options;

  /** write logs 5xx faults at error with their cause, other 5xx at warn without a stack, the rest at info; and counts. */
  const write = (log: Logger, entry: Entry, err: ConnectError | undefined, seconds: number) => {
    const canceled = err?.code === Code.Canceled;
    const status = err === undefined ? 200 : canceled ? 499 : httpStatusOf(err);
    const code = err === undefined ? "ok" : (reasonOf(err) ?? Code[err.code].toLowerCase());
    const fields = {
      protocol: entry.protocol,
      method: entry.method,
      client_id: entry.principal?.clientId,
      key_hint: entry.principal?.keyHint,
      latency_ms: round(seconds * 1000),
      status,
      code,
    };
    if (code === "internal_error") log.error({ ...fields, err: err?.cause ?? err }, "request failed");
    else if (status >= 500 && !canceled) log.warn({ ...fields, cause: String((err?.cause as Error)?.message ?? "") }, "request failed");
    else log.info(fields, "request");
    const procedure = entry.procedure === undefined ? UNMATCHED : `/${entry.procedure}`;
    counter?.observe({ procedure, protocol: entry.protocol, code }, seconds);
  };

  return {
    begin(req, res) {
      const start = performance.now();
      const requestId = newRequestId();
      const closed = new AbortController();
      const contextValues = createContextValues();
      let error: ConnectError | undefined;
      const exchange: Exchange = {
        requestId,
        logger: logger.child({ request_id: requestId }),
        signal: closed.signal,
        contextValues,
        protocol: undefined,
        procedure: undefined,
        get error() {
          return error;
        },
        fail(e) {
          const err = toPalmError(e);
          err.metadata.set(REQUEST_ID_HEADER, requestId);
          error ??= err;
          return err;
        },
      };
      contextValues.set(kRequestId, requestId);
      contextValues.set(kExchange, exchange);
      // On HTTP/2 a reset stream also "finishes" the response, hence writableEnded
      // (test/integration/door.spec.ts, "a client that leaves").
      res.once("close", () => {
        if (!res.writableEnded) {
          closed.abort(palmError("canceled"));
          if (error === undefined) exchange.fail(palmError("canceled"));
        }
        const seconds = (performance.now() - start) / 1000;
        if (exchange.protocol === undefined) {
          // The site's own paths (page, docs, readiness, metrics): not API answers, not counted.
          exchange.logger.debug({ path: pathOf(req), status: res.statusCode, latency_ms: round(seconds * 1000) }, "site");
          return;
        }
        const { procedure, protocol } = exchange;
        const entry = {
          protocol,
          procedure,
          method: procedure ?? `${req.method} ${pathOf(req)}`,
          principal: contextValues.get(kPrincipal),
        };
        write(exchange.logger, entry, error, seconds);
      });
      return exchange;
    },
    headersTimedOut() {
      const requestId = newRequestId();
      const err = palmError("timeout", { message: "The request headers were not received in time." });
      err.metadata.set(REQUEST_ID_HEADER, requestId);
      write(logger.child({ request_id: requestId }), { protocol: "http", method: undefined, procedure: undefined }, err, 0);
      return err;
    },
  };
}

/** Entry is what a log line says of the request besides its outcome. */
interface Entry {
  readonly protocol: string;
  readonly method: string | undefined;
  readonly procedure: string | undefined;
  readonly principal?: Principal;
}

const round = (ms: number) => Math.round(ms * 10) / 10;
