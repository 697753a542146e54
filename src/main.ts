/**
 * Entry point (`npm start`, compiled to dist/src/main.js): configuration, store, analysis engine,
 * server, signals.
 */
import { openStore } from "./auth/open-store.js";
import { ConfigError, loadConfig, unknownVariables, type Config } from "./config.js";
import { createAnalyzer } from "./inference/analyzer.js";
import { expectedNodeFlags, missingNodeFlags } from "./launch/node-flags.js";
import { createLogger } from "./log.js";
import { createPalmServer } from "./server/server.js";

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`palm-api: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  const logger = createLogger({ level: config.logLevel });
  const missingFlags = missingNodeFlags(expectedNodeFlags());
  if (missingFlags.length > 0)
    logger.warn({ flags: missingFlags }, "started without the Node flags of npm start (see docs/decisions/node-flags.md)");
  for (const name of unknownVariables()) logger.warn({ variable: name }, "unknown PALM_* variable ignored (a typo?)");
  if ((config.redisUrl !== undefined || config.redisClusterNodes !== undefined) && config.devKey !== undefined) {
    logger.warn("PALM_DEV_KEY is ignored with REDIS_URL or REDIS_CLUSTER_NODES: create keys with palmctl");
  }
  const analyzer = await createAnalyzer({
    modelPath: config.modelPath,
    workers: config.workers,
    maxQueue: config.maxQueue,
  });
  const { store, kind, devKey, devKeyGenerated } = await openStore(config, logger);
  const server = createPalmServer({ analyzer, store, config, logger, devKey });
  const port = await server.listen();
  logger.info({ port, store: kind, model: analyzer.model }, "palm-api listening (gRPC, gRPC-Web, Connect, REST)");
  if (devKeyGenerated && devKey) {
    // Shown once, on stdout, on purpose: the only place this generated key ever appears.
    process.stdout.write(
      `\n  Development API key (in-memory store, client "dev", plan "pro"; new at every start):\n\n    ${devKey}\n\n` +
        `  Demo page (key filled in): http://localhost:${port}/   API reference: http://localhost:${port}/docs\n\n`,
    );
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down");
    try {
      await server.shutdown();
      await store.close();
      await analyzer.close();
      logger.info("bye");
      logger.flush?.();
      process.exit(0);
    } catch (err) {
      logger.error({ err }, "shutdown failed");
      process.exit(1);
    }
  };
  process.once("SIGTERM", () => void stop("SIGTERM"));
  process.once("SIGINT", () => void stop("SIGINT"));
}

main().catch((err) => {
  process.stderr.write(`palm-api: failed to start: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
