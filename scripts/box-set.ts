/**
 * The box set (`<repo>/../shared/real-palms-boxes/`, read there, never copied into the
 * repository), as eval:boxes and the training views read it.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

export const BOX_DIR = resolve(dirname(fileURLToPath(import.meta.url)), "../../shared/real-palms-boxes");

/** Box is [xmin, ymin, xmax, ymax] in the photo's 640 x 640 pixels. */
export type Box = [number, number, number, number];

/**
 * partOf names the part of the box set a file belongs to, by its name's SHA-256: the evaluation
 * quarter (0-3, the set's README; never trained or tuned on), the eighth of the training part
 * training/train_real.py holds out (4-5), or the rest.
 */
export function partOf(file: string): "eval" | "heldout" | "train" {
  const h = createHash("sha256").update(file).digest("hex")[0];
  return "0123".includes(h) ? "eval" : "45".includes(h) ? "heldout" : "train";
}

/** boundsOf is the box around `boxes` (at least one). */
export function boundsOf(boxes: readonly Box[]): Box {
  return [
    Math.min(...boxes.map((b) => b[0])),
    Math.min(...boxes.map((b) => b[1])),
    Math.max(...boxes.map((b) => b[2])),
    Math.max(...boxes.map((b) => b[3])),
  ];
}

/** readBoxes parses boxes.csv into file -> line (heart, head, life, fate) -> box. */
export function readBoxes(dir = BOX_DIR): Map<string, Record<string, Box>> {
  const out = new Map<string, Record<string, Box>>();
  for (const row of readFileSync(join(dir, "boxes.csv"), "utf8").trim().split("\n").slice(1)) {
    const [file, line, ...v] = row.split(",");
    out.set(file, { ...out.get(file), [line]: v.map(Number) as Box });
  }
  return out;
}
