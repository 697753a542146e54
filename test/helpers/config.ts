/**
 * Configurations for tests and bench tools: the real defaults of {@link loadConfig} (an empty
 * environment) with some fields replaced.
 */
import { loadConfig, type Config } from "../../src/config.js";

/**
 * UNTHROTTLED: per-client limits no test of something else reaches (the fuzzers send hundreds of
 * requests with one key); test/integration/rate-limit.spec.ts sets its own.
 */
export const UNTHROTTLED: Config["rateLimits"] = Object.freeze({
  "*": Object.freeze({ rate: 100_000, burst: 100_000, concurrency: 10_000 }),
});

/** createTestConfig returns a frozen {@link Config} with defaults (per-client limits {@link UNTHROTTLED}) and `overrides`. */
export function createTestConfig(overrides: Partial<Config> = {}): Config {
  return Object.freeze({ ...loadConfig({}), rateLimits: UNTHROTTLED, ...overrides });
}
