/**
 * The service in memory, without a network: the real routes and interceptors behind
 * `createRouterTransport`, for unit tests.
 */
import { createClient, createRouterTransport, type Client } from "@connectrpc/connect";
import { Health } from "../../gen/grpc/health/v1/health_pb.js";
import { PalmService } from "../../gen/palm/v1/palm_pb.js";
import type { Store } from "../../src/auth/store.js";
import type { Config } from "../../src/config.js";
import { createTestConfig } from "./config.js";
import type { Analyzer } from "../../src/inference/analyzer-types.js";
import { createLogger } from "../../src/log.js";
import { createInterceptors, createRoutes } from "../../src/server/routes.js";

/** InMemoryService holds clients of both services over an in-process transport. */
export interface InMemoryService {
  palm: Client<typeof PalmService>;
  health: Client<typeof Health>;
}

/** createInMemoryService wires the real routes and interceptors to `createRouterTransport`. */
export function createInMemoryService(options: {
  analyzer: Analyzer;
  store: Store;
  config?: Partial<Config>;
  now?: () => Date;
}): InMemoryService {
  const config = createTestConfig(options.config);
  const routes = createRoutes({ analyzer: options.analyzer, config });
  const interceptors = createInterceptors({
    store: options.store,
    config,
    logger: createLogger({ level: "silent" }),
    now: options.now,
  });
  const transport = createRouterTransport(routes, { router: { interceptors } });
  return { palm: createClient(PalmService, transport), health: createClient(Health, transport) };
}

/** catchConnect awaits a call expected to fail and returns its error. */
export async function catchError(p: Promise<unknown>): Promise<import("@connectrpc/connect").ConnectError> {
  const { ConnectError } = await import("@connectrpc/connect");
  try {
    await p;
  } catch (e) {
    return ConnectError.from(e);
  }
  throw new Error("expected the call to fail");
}
