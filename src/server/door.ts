/**
 * The door: every API request on the port, whatever its protocol (gRPC, gRPC-Web, Connect unary
 * and streaming, REST), is routed and let in here from its headers alone, before a byte of its
 * body is read or decompressed. It decides; the request path (request-path.ts) carries the
 * decision out. Unknown paths (404) and methods (405), a missing, malformed, unknown or revoked
 * key (401), a plan missing from the configuration (500), a used-up month (429) and a store that
 * cannot answer (503) are refusals, and so is a key this replica refused for its rate moments ago
 * (429, without the store); a client that goes away while its key is checked is noticed
 * at once. test/integration/door.spec.ts pins it.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { ConnectError } from "@connectrpc/connect";
import { type Exchange, kPrincipal, type Principal } from "../request/context-keys.js";
import { pathOf, protocolOf, webHeaders, wireProtocolOf, type NodeRequest, type WireProtocol } from "../wire/http.js";
import type { UniversalHandler } from "../wire/private-apis.js";
import { palmError } from "../errors.js";
import type { RestRoute, RestTable } from "../rest/rest-routes.js";

/** Verdict is what the door decided about one request. */
export type Verdict =
  /** Refused: answer `error` in `wire`'s format, without reading the body. */
  | { readonly kind: "refuse"; readonly wire: WireProtocol; readonly error: ConnectError }
  /** An RPC connect refuses by itself without reading the body (a method or content type it does not serve). */
  | { readonly kind: "connect-refuses"; readonly handler: UniversalHandler }
  /** An RPC: connect's handler runs it (`keyed`: a recognised key came with it). */
  | { readonly kind: "rpc"; readonly handler: UniversalHandler; readonly keyed: boolean }
  /** A REST call of `route`. */
  | { readonly kind: "rest"; readonly route: RestRoute; readonly keyed: boolean };

/** DoorOptions configure {@link createDoor}. */
export interface DoorOptions {
  /** connect's handlers by request path ("/palm.v1.PalmService/Analyze"). */
  rpc: ReadonlyMap<string, UniversalHandler>;
  /** REST routes by path and HTTP method. */
  rest: RestTable;
  /** Methods that need no key. */
  publicMethods: readonly DescMethod[];
  /**
   * checkAccess resolves the principal from the headers (key, plan, a month not used up); throws
   * our errors. `recognised` hears of the principal once the key is, before its month is checked.
   */
  checkAccess(header: Headers, recognised?: (principal: Principal) => void): Promise<Principal>;
  /**
   * refusedLocally answers, from the headers and without the store, a key this replica knows to
   * be refused still (src/auth/rate-gate.ts): its principal and refusal, before checkAccess.
   * Default: none.
   */
  refusedLocally?(header: Headers): { principal: Principal; error: ConnectError } | undefined;
}

/** Door decides, from its headers, what becomes of a request. */
export interface Door {
  /** decide routes `req` and checks its key; sets the exchange's protocol, procedure and principal. */
  decide(req: NodeRequest, exchange: Exchange): Promise<Verdict>;
}

/** createDoor returns the {@link Door}. */
export function createDoor(options: DoorOptions): Door {
  const publicMethods = new Set(options.publicMethods);

  /** enter lets `method` in: public methods at once, keyed ones once their key is recognised. */
  async function enter(req: NodeRequest, exchange: Exchange, method: DescMethod): Promise<boolean | ConnectError> {
    if (publicMethods.has(method)) return false;
    const header = webHeaders(req);
    const known = options.refusedLocally?.(header);
    if (known) {
      exchange.contextValues.set(kPrincipal, known.principal);
      return exchange.fail(known.error);
    }
    try {
      // A recognised key's principal is on the exchange even when its month is refused: the
      // refusal is then this client's (request-path.ts paces a client's refused uploads).
      const recognised = (principal: Principal) => exchange.contextValues.set(kPrincipal, principal);
      exchange.contextValues.set(kPrincipal, await untilAborted(options.checkAccess(header, recognised), exchange.signal));
      return true;
    } catch (e) {
      return exchange.fail(exchange.signal.aborted ? palmError("canceled") : e);
    }
  }

  return {
    async decide(req, exchange) {
      const path = pathOf(req);
      const contentType = String(req.headers["content-type"] ?? "");
      const handler = options.rpc.get(path);
      const byMethod = handler ? undefined : options.rest.get(path);
      const wire = wireProtocolOf(contentType, handler !== undefined, req.headers["connect-protocol-version"] !== undefined);
      exchange.protocol = protocolOf(wire);
      if (handler) {
        exchange.procedure = procedureOf(handler.method);
        // What connect refuses by itself without reading the body (405, 415) stays its own answer.
        if (!handler.allowedMethods.includes(req.method ?? "") || !handler.supportedContentType(contentType)) {
          return { kind: "connect-refuses", handler };
        }
        const keyed = await enter(req, exchange, handler.method);
        return typeof keyed === "boolean" ? { kind: "rpc", handler, keyed } : { kind: "refuse", wire, error: keyed };
      }
      const route = byMethod?.get(req.method ?? "");
      if (route) {
        exchange.procedure = procedureOf(route.method);
        const keyed = await enter(req, exchange, route.method);
        return typeof keyed === "boolean" ? { kind: "rest", route, keyed } : { kind: "refuse", wire: "rest", error: keyed };
      }
      // No RPC and no route: a gRPC client on HTTP/2 gets a trailers-only UNIMPLEMENTED, every
      // other client the REST error body (Connect and gRPC-Web clients read it as unimplemented).
      const allow = byMethod ? [...byMethod.keys()].join(", ") : undefined;
      const error = exchange.fail(allow === undefined ? palmError("not_found") : palmError("method_not_allowed", { metadata: { allow } }));
      return { kind: "refuse", wire: "stream" in req && wire === "grpc" ? "grpc" : "rest", error };
    },
  };
}

/** procedureOf names an RPC as logs do: "palm.v1.PalmService/Analyze". */
const procedureOf = (method: DescMethod) => `${method.parent.typeName}/${method.name}`;

/** untilAborted settles with `p`, or rejects as soon as `signal` aborts (`p` is left to settle unobserved). */
function untilAborted<T>(p: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    p.catch(() => {});
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    p.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
