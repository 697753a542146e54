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

/**
 * closeWhenIdle waits (up to 10 s) for analyses abandoned by timeouts or cancels to leave the
 * workers, then closes: terminating a worker in the middle of a native inference call aborts the
 * whole process ("terminate called after throwing an instance of 'Napi::Error'").
 */
export async function closeWhenIdle(analyzer: EngineAnalyzer | undefined): Promise<void> {
  if (!analyzer) return;
  const deadline = Date.now() + 10_000;
  while (analyzer.stats().running > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await analyzer.close();
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
