/**
 * Starting worker processes whose entry may be a TypeScript file. Under `node --import tsx` and
 * under vitest the entry is `.ts`: the child is started with tsx's loader (resolved to a file URL,
 * so it does not depend on the working directory); compiled `.js` entries start directly. The
 * child never inherits the parent's Node flags (vitest's or a profiler's). Messages use the
 * `advanced` serialisation, so typed arrays cross as bytes, not as JSON.
 */
import { fork, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { packageUrl } from "./worker-thread.js";

/** spawnWorkerProcess starts `node [--import tsx] <entry>` with an IPC channel; its stdout and stderr are the parent's. */
export function spawnWorkerProcess(url: URL): ChildProcess {
  const execArgv = url.pathname.endsWith(".ts") ? ["--import", packageUrl("tsx")] : [];
  return fork(fileURLToPath(url), [], {
    execArgv,
    serialization: "advanced",
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
}
