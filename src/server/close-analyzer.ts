/**
 * Closing the engine safely: analyses abandoned by timeouts or cancels may still run in a
 * worker, and terminating a worker inside a native inference call aborts the whole process
 * ("terminate called after throwing an instance of 'Napi::Error'"). Wait for them first.
 */
import type { EngineAnalyzer } from "../inference/analyzer.js";

/** closeAnalyzerWhenIdle waits up to `timeoutMs` (default 10 s) for no running analysis, then closes. */
export async function closeAnalyzerWhenIdle(analyzer: EngineAnalyzer, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (analyzer.stats().running > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await analyzer.close();
}
