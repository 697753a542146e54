/**
 * The line model's own time for one view, as the engine runs it (createModelSession: one
 * onnxruntime thread and the engine's session options), for several ONNX files side by side in
 * alternating rounds, so that a machine whose speed drifts moves them alike. Prints each file's
 * median and its ratio to the first file's. Measures only (docs/decisions/finer-view-cost.md): a
 * candidate's architecture and view size can be timed before it is trained, since untrained
 * weights cost what trained ones do.
 *
 *   node --import tsx scripts/model-cost.ts [--rounds 15] BASE.onnx OTHER.onnx ...
 */
import { basename } from "node:path";
import { median } from "../bench/stats.js";
import { createModelSession } from "../src/inference/model-session.js";
import { scriptArgs } from "./cli.js";

async function main(): Promise<number> {
  const usage = "usage: node --import tsx scripts/model-cost.ts [--rounds N] BASE.onnx [OTHER.onnx ...]";
  const args = scriptArgs(usage, { options: { rounds: { type: "string", default: "15" } }, allowPositionals: true });
  if (typeof args === "number") return args;
  const { values, positionals } = args;
  if (positionals.length === 0) {
    console.error(usage);
    return 2;
  }
  const rounds = Number(values.rounds);
  const models = [];
  for (const path of positionals) {
    const session = await createModelSession({ modelPath: path });
    const S = session.metadata.inputSize;
    // A fixed, view-like input: values in [0, 1), the same for every round.
    const input = Float32Array.from({ length: 3 * S * S }, (_, i) => ((i * 2654435761) % 1000) / 1000);
    models.push({ path, session, input, times: [] as number[] });
  }
  for (let r = 0; r < rounds; r++) {
    for (const m of r % 2 === 0 ? models : [...models].reverse()) {
      const t0 = performance.now();
      await m.session.run(m.input);
      m.times.push(performance.now() - t0);
    }
  }
  const base = median(models[0].times);
  console.log("| model | view | median ms | ratio to the first |");
  console.log("|---|---|---|---|");
  for (const m of models) {
    const ms = median(m.times);
    console.log(`| ${basename(m.path)} | ${m.session.metadata.inputSize} px | ${ms.toFixed(1)} | ${(ms / base).toFixed(2)}x |`);
    await m.session.release();
  }
  return 0;
}

process.exitCode = await main();
