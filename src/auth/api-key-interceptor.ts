/**
 * Key checking for every protocol (gRPC, gRPC-Web, Connect, and REST through the in-process
 * client). Runs on headers only: on REST the body is read later, by the innermost interceptor,
 * so a bad key costs no body read and no image work (test/integration/rest.spec.ts).
 */
import type { DescMethod } from "@bufbuild/protobuf";
import type { Interceptor } from "@connectrpc/connect";
import { palmError, toPalmError } from "../errors.js";
import { redactKey } from "../log.js";
import { API_KEY_HEADER, hashApiKey, isWellFormedApiKey } from "./api-key.js";
import { kPrincipal } from "./context-keys.js";
import type { Store } from "./store.js";

/** ApiKeyInterceptorOptions configure {@link createApiKeyInterceptor}. */
export interface ApiKeyInterceptorOptions {
  store: Store;
  /** Methods callable without a key (health checks). Default: none. */
  publicMethods?: readonly DescMethod[];
}

/**
 * createApiKeyInterceptor rejects a missing key (`missing_api_key`), a malformed key before any
 * store lookup, and an unknown or revoked key (`invalid_api_key`); a store failure is
 * `store_unavailable` (fail closed). A recognised key sets {@link kPrincipal}.
 */
export function createApiKeyInterceptor(options: ApiKeyInterceptorOptions): Interceptor {
  const publicMethods = new Set(options.publicMethods ?? []);
  return (next) => async (req) => {
    if (publicMethods.has(req.method)) return next(req);
    const key = req.header.get(API_KEY_HEADER);
    if (key === null || key === "") throw palmError("missing_api_key");
    if (!isWellFormedApiKey(key)) throw palmError("invalid_api_key");
    const keyHash = hashApiKey(key);
    let owner;
    try {
      owner = await options.store.findKey(keyHash);
    } catch (e) {
      throw toPalmError(e);
    }
    if (!owner) throw palmError("invalid_api_key");
    req.contextValues.set(kPrincipal, { clientId: owner.clientId, plan: owner.plan, keyHash, keyHint: redactKey(key) });
    return next(req);
  };
}
