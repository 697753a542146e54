#!/usr/bin/env node
// palmctl: operator CLI for API keys and usage (see README). Runs the TypeScript source via tsx.
import { register } from "tsx/esm/api";
register();
const { runPalmctl } = await import("../src/cli/palmctl.ts");
process.exitCode = await runPalmctl(process.argv.slice(2));
