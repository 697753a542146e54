#!/usr/bin/env node
// palmctl: operator CLI for API keys and usage (see README). Runs the TypeScript source via tsx.
import { register } from "tsx/esm/api";
register();
await import("../src/cli/palmctl.ts");
