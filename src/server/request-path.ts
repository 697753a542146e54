/**
 * The request path: every request on the port, in order, whatever its protocol.
 *
 *   1. receive   http-front.ts           one port for HTTP/2 and HTTP/1.1, slow-client bounds, drain
 *   2. exchange  access-log.ts           a request id and a child logger; when the response closes,
 *                                        one log line and one count, whatever answered
 *   3. site      src/http/               CORS, the demo page, the docs, readiness, metrics
 *   4. door      door.ts                 route, key and month from the headers, before any body;
 *                src/auth/rate-gate.ts   then the client's rate and requests in flight (429 rate_limited)
 *   5. adapter   rpc-adapter.ts          gRPC, gRPC-Web, Connect: connect's handler, the interceptors
 *                src/rest/rest-handler.ts  REST: the same interceptors and service
 *   6. answer    respond.ts              the answer written, an unread body let go; a refusal in the
 *                src/wire/error-answer.ts  caller's wire format, a client's refused uploads paced
 *                refusal-pace.ts         (at most 8 MiB of them discarded a second)
 *
 * The interceptors (routes.ts) run inside step 5 for both adapters: the outcome (request id,
 * errors normalised and noted on the exchange), the key, the quota ticket.
 */
import type { ConnectError } from "@connectrpc/connect";
import { setTimeout as sleep } from "node:timers/promises";
import { type Exchange, kPrincipal } from "../request/context-keys.js";
import { errorAnswer } from "../wire/error-answer.js";
import { wireProtocolOf, type NodeHandlerFn, type NodeRequest, type NodeResponse, type WireProtocol } from "../wire/http.js";
import { palmError } from "../errors.js";
import type { SiteHandler } from "../http/site-handler.js";
import type { RestHandler } from "../rest/rest-handler.js";
import type { AccessLog } from "./access-log.js";
import type { Door, Verdict } from "./door.js";
import type { RefusalPace, Turn } from "./refusal-pace.js";
import { respond, unreadBytes, widenWindows } from "./respond.js";
import type { RpcAdapter } from "./rpc-adapter.js";

/** RequestPathOptions are the steps of {@link createRequestPath}, each built by its own module. */
export interface RequestPathOptions {
  accessLog: AccessLog;
  site: SiteHandler;
  door: Door;
  rpc: RpcAdapter;
  rest: RestHandler;
  /** HTTP/2 receive windows in bytes a connection gets once a call on it came with a recognised key. */
  windows: { stream: number; connection: number };
  /**
   * limits takes one step of a keyed request's per-client limits (src/auth/rate-gate.ts) after the
   * door let it in, before any body: resolves with the refusal (429 rate_limited), or undefined
   * when the request may go on, holding its place until `res` closes. Default: none.
   */
  limits?: (res: NodeResponse, exchange: Exchange) => Promise<ConnectError | undefined>;
  /** pace schedules the refusals of unread uploads, per client or, without a recognised key, per address (refusal-pace.ts). Default: none. */
  pace?: RefusalPace;
}

const NOW: Turn = { linger: true, waitMs: 0 };

/** createRequestPath returns the node handler the HTTP front runs for every request. */
export function createRequestPath(options: RequestPathOptions): NodeHandlerFn {
  const { accessLog, site, door, rpc, rest, windows, pace } = options;

  /**
   * refuse answers `error` in `wire`'s format, unless the client is gone. A refusal of an unread
   * upload first waits for its turn, its body unread: a recognised key's in its client's pace,
   * any other in the pace of its connection's address (behind a proxy, one for all of them).
   */
  const refuse = async (req: NodeRequest, res: NodeResponse, exchange: Exchange, wire: WireProtocol, error: ConnectError) => {
    if (exchange.signal.aborted) return;
    const principal = exchange.contextValues.get(kPrincipal);
    const payer = principal ? `client ${principal.clientId}` : `address ${req.socket?.remoteAddress}`;
    const turn = pace ? pace.turn(payer, unreadBytes(req)) : NOW;
    if (turn.waitMs > 0) await sleep(turn.waitMs, undefined, { signal: exchange.signal }).catch(() => {});
    if (!exchange.signal.aborted) respond(req, res, errorAnswer(wire, error, String(req.headers["content-type"] ?? "")), turn.linger);
  };

  /** pass carries out the door's verdict. */
  const pass = async (req: NodeRequest, res: NodeResponse, exchange: Exchange, verdict: Verdict): Promise<void> => {
    if (verdict.kind === "refuse") return refuse(req, res, exchange, verdict.wire, verdict.error);
    if (verdict.kind === "connect-refuses") return rpc.serve(req, res, verdict.handler, exchange);
    if (verdict.keyed && options.limits) {
      const refusal = await options.limits(res, exchange);
      if (refusal) return refuse(req, res, exchange, wireOf(req, verdict), refusal);
    }
    // A recognised key opens the connection's full HTTP/2 windows (respond.ts, widenWindows).
    if (verdict.keyed) widenWindows(req, windows);
    if (verdict.kind === "rest") return respond(req, res, await rest.serve(req, res, verdict.route, exchange));
    // "Expect: 100-continue" only once let in: a refused client never sends its body (door.spec.ts).
    if (/100-continue/i.test(String(req.headers.expect ?? ""))) res.writeContinue();
    return rpc.serve(req, res, verdict.handler, exchange);
  };

  return (req, res) => {
    const exchange = accessLog.begin(req, res);
    if (site(req, res)) return;
    door
      .decide(req, exchange)
      .then((verdict) => pass(req, res, exchange, verdict))
      .catch((e: unknown) => {
        // Only a bug in the path itself gets here: answer 500 generically.
        void refuse(req, res, exchange, "rest", exchange.fail(palmError("internal_error", { cause: e })));
      });
  };
}

/** wireOf is the wire format of a let-in request's answer, as the door reads it. */
function wireOf(req: NodeRequest, verdict: Verdict): WireProtocol {
  if (verdict.kind === "rest") return "rest";
  return wireProtocolOf(String(req.headers["content-type"] ?? ""), true, req.headers["connect-protocol-version"] !== undefined);
}
