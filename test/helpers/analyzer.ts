/**
 * The real analysis engine for tests: one per test file (vitest isolates files), small pool.
 * The only stand-in is {@link createFailingAnalyzer}, for faults the real engine cannot be made
 * to produce on demand.
 */
import { createAnalyzer, type AnalyzerOptions, type EngineAnalyzer } from "../../src/inference/analyzer.js";
import type { Analyzer } from "../../src/inference/analyzer-types.js";

/** createTestAnalyzer loads models/palm-lines/palm-lines.onnx with one worker by default. */
export function createTestAnalyzer(options: AnalyzerOptions = {}): Promise<EngineAnalyzer> {
  return createAnalyzer({ workers: 1, ...options });
}

/** createFailingAnalyzer wraps a real analyzer's model name around a fault (internal_error tests). */
export function createFailingAnalyzer(model: string, error: unknown): Analyzer {
  return {
    model,
    async analyze() {
      throw error;
    },
    async close() {},
  };
}
