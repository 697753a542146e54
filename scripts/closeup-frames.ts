/**
 * How a close-up's palm frame differs from its uncropped photo's, and what that costs its lines.
 * For each photo of a part of the box set whose palm the engine finds as it is: the close-up
 * (eval:boxes' --degrade, tight by default) is read by the engine; its frame (from its own
 * landmarks) is compared with the uncropped photo's frame mapped into the close-up (turn, side,
 * centre); and the close-up is read again with the uncropped photo's landmarks in place of its own
 * (an "oracle" hand search), so that the lines' agreement with their boxes can be told apart by
 * frame; and the engine's close-up test and wrist move (closeupLandmarks): the room beyond the knuckles on the
 * whole photos and on the close-ups, and the frame's size error with the close-up's own wrist and with it moved.
 * Measures only; nothing is tuned on it (docs/decisions/closeup-frames.md).
 *
 *   node --import tsx scripts/closeup-frames.ts [--part train|heldout] [--degrade tight|closeup] [--model FILE]
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { quantile } from "../bench/stats.js";
import { LINE_NAMES } from "../src/inference/analyzer-types.js";
import { analyzeImage, createPipelineEngine, type PipelineEngine } from "../src/inference/pipeline.js";
import { CLOSEUP_MARGIN, FRAME_SIDE, closeupLandmarks, knuckleRoom, palmFrame } from "../src/landmarks/palm-frame.js";
import { BOX_DIR, type Box, partOf, readBoxes } from "./box-set.js";
import { oneOf, scriptArgs } from "./cli.js";
import { type Degrade, degraded, maskAgreement } from "./eval-boxes.js";

/** quantiles prints bench/stats' interpolated quantiles (the decision's tables were read by nearest rank). */
function quantiles(values: number[], ps: number[]): string {
  return ps.map((p) => `${Math.round(p * 100)}th ${values.length > 0 ? quantile(values, p).toFixed(2) : "-"}`).join(", ");
}

const USAGE = "usage: node --import tsx scripts/closeup-frames.ts [--part train|heldout] [--degrade tight|closeup] [--model FILE]";

async function main(): Promise<number> {
  const args = scriptArgs(USAGE, {
    options: { part: { type: "string", default: "train" }, degrade: { type: "string", default: "tight" }, model: { type: "string" } },
  });
  if (typeof args === "number") return args;
  const { values } = args;
  if (values.part === "eval") {
    console.error("closeup-frames: the evaluation quarter is read by eval:boxes only");
    return 2;
  }
  if (!oneOf("--part", values.part, ["heldout", "train"], USAGE) || !oneOf("--degrade", values.degrade, ["tight", "closeup"], USAGE)) {
    return 2;
  }
  const boxes = new Map([...readBoxes()].filter(([file]) => partOf(file) === values.part));
  const engine = await createPipelineEngine({ modelPath: values.model });
  const turn: number[] = [];
  const zoom: number[] = [];
  const shift: number[] = [];
  // The close-up test and the wrist's move (closeupLandmarks): the room beyond the knuckles on the whole photos
  // and on the close-ups, and the frame's size error, |ln(true side / side)|, with the close-up's own wrist and moved.
  const roomWhole: number[] = [];
  const roomCut: number[] = [];
  const sizeOwn: number[] = [];
  const sizeMoved: number[] = [];
  const tally = { own: { agree: [0, 0, 0], wrong: [0, 0, 0] }, oracle: { agree: [0, 0, 0], wrong: [0, 0, 0] } };
  let read = 0;
  let oracleNone = 0;
  try {
    for (const file of [...boxes.keys()].sort()) {
      const bytes = await readFile(join(BOX_DIR, "images", file));
      const whole = (await analyzeImage(bytes, engine)).result;
      if (whole.reason || !whole.hand) continue;
      roomWhole.push(knuckleRoom(whole.hand.landmarks, whole.width, whole.height));
      const lineBoxes = LINE_NAMES.map((line) => boxes.get(file)![line]).filter((b): b is Box => b !== undefined);
      const cut = await degraded(bytes, values.degrade as Degrade, lineBoxes);
      const own = (await analyzeImage(cut.bytes, engine)).result;
      if (!own.hand || own.reason === "no_hand" || own.reason === "back_of_hand") continue;
      read++;
      const truth = whole.hand.landmarks.map(([x, y]) => cut.box([x, y, x, y]).slice(0, 2) as [number, number]);
      const want = palmFrame(truth);
      const got = palmFrame(own.hand.landmarks);
      roomCut.push(knuckleRoom(own.hand.landmarks, own.width, own.height));
      sizeOwn.push(Math.abs(Math.log(want.side / got.side)));
      sizeMoved.push(Math.abs(Math.log(want.side / palmFrame(closeupLandmarks(own.hand.landmarks, own.width, own.height)).side)));
      const deg = ((Math.atan2(got.ey[1], got.ey[0]) - Math.atan2(want.ey[1], want.ey[0])) * 180) / Math.PI;
      turn.push(((deg + 540) % 360) - 180);
      zoom.push(want.side / got.side); // > 1: the close-up's view shows the palm larger than it should
      shift.push(Math.hypot(got.centre[0] - want.centre[0], got.centre[1] - want.centre[1]) / want.side);
      const oracle: PipelineEngine = {
        lines: engine.lines,
        hands: { detect: async () => ({ landmarks: truth, handedness: whole.hand!.handedness }) },
      };
      const known = (await analyzeImage(cut.bytes, oracle)).result;
      if (known.reason) oracleNone++;
      for (const [name, result] of [
        ["own", own],
        ["oracle", known],
      ] as const) {
        for (const [i, line] of LINE_NAMES.entries()) {
          const box = boxes.get(file)![line];
          if (!box || !result.stats[line].detected) continue;
          tally[name][(await maskAgreement(result.masks[line], cut.box(box))).agrees ? "agree" : "wrong"][i]++;
        }
      }
    }
  } finally {
    await engine.close();
  }
  console.log(`box set part '${values.part}', ${values.degrade} close-ups read with a hand by the engine: ${read}`);
  console.log(`turn of the close-up's frame, degrees: ${quantiles(turn, [0.05, 0.25, 0.5, 0.75, 0.95])}`);
  console.log(`palm enlarged in the close-up's view (true side / its side): ${quantiles(zoom, [0.05, 0.25, 0.5, 0.75, 0.95])}`);
  const below = (values: number[]) => values.filter((v) => v < CLOSEUP_MARGIN).length;
  console.log(
    `room beyond the knuckles (wrist-to-knuckle lengths), whole photos: least ${Math.min(...roomWhole).toFixed(2)}, ${quantiles(roomWhole, [0.05, 0.5])}, under ${CLOSEUP_MARGIN}: ${below(roomWhole)} of ${roomWhole.length}`,
  );
  console.log(
    `  the close-ups: ${quantiles(roomCut, [0.5, 0.95])}, most ${Math.max(...roomCut).toFixed(2)}, under ${CLOSEUP_MARGIN}: ${below(roomCut)} of ${roomCut.length}`,
  );
  console.log(
    `frame size error |ln(true side / side)|, own wrist: ${quantiles(sizeOwn, [0.5, 0.9])}; wrist moved: ${quantiles(sizeMoved, [0.5, 0.9])}`,
  );
  console.log(`centre moved, in views (frame sides; the palm's size is 1/${FRAME_SIDE} of one): ${quantiles(shift, [0.5, 0.9, 0.95])}`);
  console.log(
    `heart / head / life agreeing (drawn wrong), its own landmarks: ${tally.own.agree.join(" / ")} (${tally.own.wrong.join(" / ")})`,
  );
  console.log(
    `the uncropped photo's landmarks (the engine moves their wrist too, as any close-up's): ${tally.oracle.agree.join(" / ")} (${tally.oracle.wrong.join(" / ")}); no lines on ${oracleNone} of them`,
  );
  return 0;
}

if (import.meta.url === `file://${process.argv[1]}`) process.exitCode = await main();
