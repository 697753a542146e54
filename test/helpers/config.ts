/**
 * Configurations for tests and bench tools: the real defaults of {@link loadConfig} (an empty
 * environment) with some fields replaced.
 */
import { loadConfig, type Config } from "../../src/config.js";

/** createTestConfig returns a frozen {@link Config} with defaults and `overrides`. */
export function createTestConfig(overrides: Partial<Config> = {}): Config {
  return Object.freeze({ ...loadConfig({}), ...overrides });
}
