/**
 * config-table writes the configuration table of docs/operations.md from the config schema
 * (src/config.ts), replacing the table that follows the "## Configuration" heading.
 * test/unit/readme.spec.ts fails until it has been run after a change of the schema.
 *
 *   npm run docs:config
 */
import { readFileSync, writeFileSync } from "node:fs";
import { renderConfigTable } from "../src/config.js";

const file = new URL("../docs/operations.md", import.meta.url);
const doc = readFileSync(file, "utf8");
const section = doc.indexOf("\n## Configuration\n");
const start = doc.indexOf("\n| variable | default | meaning |\n", section);
if (section < 0 || start < 0) throw new Error("docs/operations.md: no configuration table after '## Configuration'");
let end = start + 1;
while (doc.startsWith("|", end)) end = doc.indexOf("\n", end) + 1;
writeFileSync(file, `${doc.slice(0, start + 1)}${renderConfigTable()}\n${doc.slice(end)}`);
