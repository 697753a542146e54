/**
 * A production install (`npm ci --omit=dev` over a built checkout) converts the hand models and
 * starts the server with neither tsx nor TypeScript installed, and without src/ or tools/: only
 * what the Dockerfile's final stage holds, plus scripts/ for `postinstall`. The install is
 * emulated without a registry: node_modules holds only the lock file's production packages
 * (links to this checkout's), then package.json's `postinstall` runs through npm as `npm ci`
 * runs it.
 */
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HAND_MODEL_FILES } from "../../src/landmarks/hand-models.js";
import { buildDist } from "../helpers/dist.js";
import { postAnalyze } from "../helpers/rest.js";
import { type ServerProcess, startServerProcess } from "../helpers/server-process.js";

const root = new URL("../../", import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), "palm-production-"));
let server: ServerProcess | undefined;

/** The files of a built checkout that production needs, and node_modules with the production packages only. */
function productionCopy(): void {
  for (const p of [
    "package.json",
    "package-lock.json",
    "scripts",
    "dist",
    "bin",
    "web",
    "gen/openapi",
    "models/palm-lines/palm-lines.onnx",
    "models/hands/README.md",
  ]) {
    mkdirSync(dirname(join(dir, p)), { recursive: true });
    cpSync(join(root, p), join(dir, p), { recursive: true });
  }
  rmSync(join(dir, "dist/.tsbuildinfo"), { force: true });
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")) as { packages: Record<string, { dev?: boolean }> };
  for (const [path, entry] of Object.entries(lock.packages)) {
    // Top-level packages only: a nested one lives inside its parent's folder.
    if (!path.startsWith("node_modules/") || path.includes("/node_modules/", 1) || entry.dev) continue;
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    symlinkSync(join(root, path), join(dir, path), "dir");
  }
}

beforeAll(async () => {
  await buildDist();
  productionCopy();
}, 180_000);
afterAll(async () => {
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("a production install", () => {
  it("has neither tsx nor TypeScript", () => {
    const require = createRequire(join(dir, "package.json"));
    expect(() => require.resolve("tsx")).toThrow();
    expect(() => require.resolve("typescript")).toThrow();
    expect(existsSync(join(dir, "node_modules/onnxruntime-node"))).toBe(true);
  });

  it("converts the hand models at install with compiled JavaScript", async () => {
    const { stdout } = await promisify(execFile)("npm", ["run", "postinstall"], { cwd: dir });
    expect(stdout).toContain("hand models converted");
    for (const file of Object.values(HAND_MODEL_FILES)) expect(existsSync(join(dir, "models/hands", file)), file).toBe(true);
  }, 60_000);

  it("starts as npm start does and answers an analysis", async () => {
    server = await startServerProcess({ PALM_WORKERS: "1", PALM_DEV_KEY: "", LOG_LEVEL: "info" }, [], dir, { keepOutput: true });
    expect((await fetch(`${server.url}/v1/palm/health`)).status).toBe(200);
    const devKey = /^\s+(palm_live_[0-9a-f]{32})$/m.exec(server.output())?.[1];
    expect(devKey).toBeDefined();
    const image = readFileSync(join(root, "examples/sample-palm.jpg")).toString("base64");
    const { res, json } = await postAnalyze(server.url, { image }, { "x-api-key": devKey! });
    expect(res.status).toBe(200);
    expect(json.object).toBe("palm.analysis");
  }, 120_000);
});
