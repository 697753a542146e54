#!/usr/bin/env node
// palmctl: operator CLI for API keys and usage (see README). Runs the compiled CLI from dist/,
// which `npm install` builds (`npm run build` after changing src/).
import { existsSync } from "node:fs";

const entry = new URL("../dist/src/cli/palmctl.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("palmctl: dist/ is missing: run npm run build\n");
  process.exit(1);
}
const { runPalmctl } = await import(entry.href);
// Exit as soon as the command is done: a Redis client that never connected may keep a
// connect-timeout timer running for seconds after it was closed (test/integration/palmctl.spec.ts).
process.exit(await runPalmctl(process.argv.slice(2)));
