#!/usr/bin/env node
// palmctl: operator CLI for API keys and usage (see README). Runs the TypeScript source via tsx.
import { register } from "tsx/esm/api";
register();
const { runPalmctl } = await import("../src/cli/palmctl.ts");
// Exit as soon as the command is done: a Redis client that never connected may keep a
// connect-timeout timer running for seconds after it was closed (test/integration/palmctl.spec.ts).
process.exit(await runPalmctl(process.argv.slice(2)));
