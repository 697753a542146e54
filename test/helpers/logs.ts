import { PassThrough } from "node:stream";
import { createLogger, type Logger } from "../../src/log.js";

/** capturingLogger is an info-level logger whose JSON lines are parsed into `lines` as they are written. */
export function capturingLogger(lines: any[]): Logger {
  const logs = new PassThrough();
  logs.on("data", (d: Buffer) => {
    for (const l of d.toString().split("\n")) if (l) lines.push(JSON.parse(l));
  });
  return createLogger({ level: "info", destination: logs });
}
