/**
 * A real PalmServer on a free port for integration tests, with a silent logger.
 */
import type { Store } from "../../src/auth/store.js";
import type { Config } from "../../src/config.js";
import { createTestConfig } from "./config.js";
import type { Analyzer } from "../../src/inference/analyzer-types.js";
import { createLogger } from "../../src/log.js";
import { createPalmServer, type PalmServer } from "../../src/server/server.js";

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
