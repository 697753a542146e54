/**
 * Key checking for every protocol. On the network the server's door (src/server/door.ts) runs
 * {@link createKeyCheck} on the request headers before any body is read and hands the principal
 * on as a context value; this interceptor then lets the call through. In-process transports
 * (unit tests) have no door, so the interceptor runs the same check itself.
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { palmError, toPalmError } from "../errors.js";
import { redactKey } from "../log.js";
import { API_KEY_HEADER, hashApiKey, isWellFormedApiKey } from "./api-key.js";
import { kPrincipal, type Principal } from "../request/context-keys.js";
import type { Store } from "./store.js";

/** ApiKeyInterceptorOptions configure {@link createApiKeyInterceptor}. */
export interface ApiKeyInterceptorOptions {
  store: Store;
  /** Methods callable without a key (health checks). Default: none. */
  publicMethods?: readonly DescMethod[];
}

/** KeyCheck resolves the principal of a request from its headers alone; throws our errors. */
export type KeyCheck = (header: Headers) => Promise<Principal>;

/**
 * createKeyCheck rejects a missing key (`missing_api_key`), a malformed key before any store
 * lookup, and an unknown or revoked key (`invalid_api_key`); a store failure is
 * `store_unavailable` (fail closed).
 */
export function createKeyCheck(store: Store): KeyCheck {
  return async (header) => {
    const key = header.get(API_KEY_HEADER);
    if (key === null || key === "") throw palmError("missing_api_key");
    if (!isWellFormedApiKey(key)) throw palmError("invalid_api_key");
    const keyHash = hashApiKey(key);
    let owner: Awaited<ReturnType<Store["findKey"]>>;
    try {
      owner = await store.findKey(keyHash);
    } catch (e) {
      throw toPalmError(e);
    }
    if (!owner) throw palmError("invalid_api_key");
    return { clientId: owner.clientId, plan: owner.plan, keyHash, keyHint: redactKey(key) };
  };
}

/**
 * createApiKeyInterceptor sets {@link kPrincipal} for keyed methods, unless the door already did
 * (one store lookup per request).
 */
export function createApiKeyInterceptor(options: ApiKeyInterceptorOptions): Interceptor {
  const publicMethods = new Set(options.publicMethods ?? []);
  const check = createKeyCheck(options.store);
  return (next) => async (req) => {
    if (publicMethods.has(req.method) || req.contextValues.get(kPrincipal)) return next(req);
    req.contextValues.set(kPrincipal, await check(req.header));
    return next(req);
  };
}
