/**
 * A real PalmServer on a free port for integration tests, with a silent logger.
 */
import { createMemoryStore } from "../../src/auth/memory-store.js";
import type { Store } from "../../src/auth/store.js";
import type { Config } from "../../src/config.js";
import { createTestConfig } from "./config.js";
import type { Analyzer } from "../../src/inference/analyzer-types.js";
import { createLogger } from "../../src/log.js";
import { createPalmServer, type PalmServer } from "../../src/server/server.js";
import { registerKey } from "./keys.js";

/** TestServer is a listening server and its base URL. */
export interface TestServer {
  readonly server: PalmServer;
  readonly port: number;
  /** "http://127.0.0.1:PORT" */
  readonly url: string;
  close(): Promise<void>;
}

/** startServer listens on port 0 with `config` overrides. */
export async function startServer(options: {
  analyzer: Analyzer;
  store: Store;
  config?: Partial<Config>;
  now?: () => Date;
  /** Development key shown on the demo page. */
  devKey?: string;
}): Promise<TestServer> {
  const config = createTestConfig({ port: 0, host: "127.0.0.1", ...options.config });
  const server = createPalmServer({
    analyzer: options.analyzer,
    store: options.store,
    config,
    logger: createLogger({ level: process.env.TEST_LOG_LEVEL ?? "silent" }),
    now: options.now,
    devKey: options.devKey,
  });
  const port = await server.listen();
  return { server, port, url: `http://127.0.0.1:${port}`, close: () => server.shutdown(2000) };
}

/** KeyedTestServer is a {@link TestServer} on its own in-memory store, with one client's key in it. */
export interface KeyedTestServer extends TestServer {
  readonly store: Store;
  /** The plaintext key of `client`. */
  readonly key: string;
}

/**
 * startKeyedServer is {@link startServer} on a fresh in-memory store holding one key for `client`
 * on `plan`; `showKeyOnPage` makes it the development key shown on the demo page.
 */
export async function startKeyedServer(options: {
  analyzer: Analyzer;
  client: string;
  plan: string;
  config?: Partial<Config>;
  showKeyOnPage?: boolean;
}): Promise<KeyedTestServer> {
  const store = createMemoryStore();
  const key = await registerKey(store, options.client, options.plan);
  const srv = await startServer({
    analyzer: options.analyzer,
    store,
    config: options.config,
    devKey: options.showKeyOnPage ? key : undefined,
  });
  return { ...srv, store, key };
}
