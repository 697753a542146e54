/**
 * The README's examples run against a real server: the curl command and the overlay command (read
 * from README.md), the @grpc/grpc-js client and the Connect client in examples/.
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { startKeyedServer, type KeyedTestServer } from "../helpers/server.js";

const run = promisify(execFile);
const hasCurl = await run("curl", ["--version"]).then(
  () => true,
  () => false,
);
const root = new URL("../../", import.meta.url).pathname;
let analyzer: EngineAnalyzer;
let srv: KeyedTestServer;
let key: string;

beforeAll(async () => {
  analyzer = await createTestAnalyzer();
  srv = await startKeyedServer({ analyzer, client: "dev", plan: "pro" });
  key = srv.key;
});
afterAll(async () => {
  await srv?.close();
  await analyzer?.close();
});

function env(): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PALM_API_KEY: key,
    PALM_URL: srv.url,
    PALM_GRPC_TARGET: `127.0.0.1:${srv.port}`,
  };
}

describe("README examples", () => {
  it.skipIf(!hasCurl)("runs the README's curl command on examples/sample-palm.jpg, then saves the overlay as it says", async () => {
    const readme = readFileSync(`${root}README.md`, "utf8");
    const block = (marker: string) => new RegExp(`<!-- ${marker} -->\\s*\`\`\`sh\\n([\\s\\S]*?)\`\`\``).exec(readme)?.[1];
    const curl = block("curl-example");
    const overlay = block("overlay-example");
    expect(curl).toBeDefined();
    expect(overlay).toBeDefined();
    // A directory of its own with the repository's examples/, as a user's checkout would have.
    const dir = mkdtempSync(join(tmpdir(), "palm-readme-"));
    try {
      symlinkSync(`${root}examples`, join(dir, "examples"));
      await run("bash", ["-euo", "pipefail", "-c", curl!.replaceAll("http://localhost:8080", srv.url)], { cwd: dir, env: env() });
      const json = JSON.parse(readFileSync(join(dir, "result.json"), "utf8"));
      expect(json.object).toBe("palm.analysis");
      expect(json.model).toBe(analyzer.model);
      await run("bash", ["-euo", "pipefail", "-c", overlay!], { cwd: dir, env: env() });
      const jpeg = await sharp(join(dir, "overlay.jpg")).metadata();
      const sample = await sharp(`${root}examples/sample-palm.jpg`).rotate().metadata();
      expect({ format: jpeg.format, width: jpeg.width, height: jpeg.height }).toEqual({
        format: "jpeg",
        width: sample.width,
        height: sample.height,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("runs examples/grpc-js-client.ts", async () => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/grpc-js-client.ts"], { cwd: root, env: env() });
    expect(stdout).toMatch(/^quota: \d+ of 10000 left$/m);
    expect(stdout).toContain('"object": "palm.analysis"');
  });

  it("runs examples/connect-client.ts", async () => {
    const { stdout } = await run(process.execPath, ["--import", "tsx", "examples/connect-client.ts"], { cwd: root, env: env() });
    expect(stdout).toMatch(/^quota: \d+ of 10000 left$/m);
    expect(stdout).toContain(`"model": "${analyzer.model}"`);
  });

  /** runExample runs an example and resolves with its exit code and output, failures included. */
  async function runExample(file: string, extraEnv: NodeJS.ProcessEnv, args: string[] = []) {
    try {
      const { stdout, stderr } = await run(process.execPath, ["--import", "tsx", file, ...args], {
        cwd: root,
        env: { ...env(), ...extraEnv },
      });
      return { code: 0, stdout, stderr };
    } catch (e) {
      const err = e as { code: number; stdout: string; stderr: string };
      return { code: err.code, stdout: err.stdout, stderr: err.stderr };
    }
  }

  describe.each(["examples/grpc-js-client.ts", "examples/connect-client.ts"])("%s", (file) => {
    it("refuses the README's placeholder key in one line, without sending it", async () => {
      for (const placeholder of ["palm_live_…", ""]) {
        const out = await runExample(file, { PALM_API_KEY: placeholder });
        expect(out.code).toBe(2);
        expect(out.stdout).toBe("");
        expect(out.stderr).toBe("error: set PALM_API_KEY to the key `npm start` printed (palm_live_ and 32 hex characters)\n");
      }
    });

    it("prints the error table's code of an unknown key", async () => {
      const out = await runExample(file, { PALM_API_KEY: `palm_live_${"0".repeat(32)}` });
      expect(out.code).toBe(1);
      expect(out.stderr).toMatch(/^error: invalid_api_key: The API key is not valid\.\n$/);
    });

    it("reads the quota from the error's trailers and prints the error's code", async () => {
      const out = await runExample(file, {}, ["package.json"]);
      expect(out.code).toBe(1);
      expect(out.stdout).toMatch(/^quota: \d+ of 10000 left\n$/);
      expect(out.stderr).toMatch(/^error: unsupported_image_format: /);
    });
  });
});
