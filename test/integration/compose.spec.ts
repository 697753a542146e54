/**
 * compose.yaml, run: `<PALM_COMPOSE> up -d` starts the API and Redis as the README's one command
 * does, palmctl makes a key inside the API container, the README's curl upload analyses the sample
 * with the quota counted in Redis, and `down` stops the API with SIGTERM. Building and starting
 * containers takes minutes, so the suite runs it only where PALM_COMPOSE names the compose command
 * (e.g. "podman-compose"); NODE_IMAGE and REDIS_IMAGE pass through (locally built images where no
 * registry can be reached: docs/operations.md, "Container image"). Skipped, saying why, otherwise.
 */
import { execFile, spawnSync } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort } from "../helpers/ports.js";

const exec = promisify(execFile);
const root = new URL("../../", import.meta.url).pathname;
const COMPOSE = (process.env.PALM_COMPOSE ?? "").split(" ").filter(Boolean);
const why = (() => {
  if (COMPOSE.length === 0) return "PALM_COMPOSE is not set (the compose command, e.g. podman-compose)";
  const p = spawnSync(COMPOSE[0], [...COMPOSE.slice(1), "version"]);
  return p.error ? `${COMPOSE[0]} is not installed` : undefined;
})();
if (why) console.warn(`compose.spec.ts: skipped: ${why}`);

let port: number;
let project: string;
const compose = (...args: string[]) =>
  exec(COMPOSE[0], [...COMPOSE.slice(1), "-p", project, ...args], {
    cwd: root,
    env: { ...process.env, HOST_PORT: String(port) },
    maxBuffer: 64 * 1024 * 1024,
  });

describe.skipIf(why !== undefined)(`compose.yaml with ${COMPOSE.join(" ")}${why ? ` [skipped: ${why}]` : ""}`, () => {
  beforeAll(async () => {
    port = await freePort();
    project = `palm-compose-${port}`;
    await compose("up", "-d");
    const deadline = Date.now() + 180_000;
    while (
      !(await fetch(`http://127.0.0.1:${port}/v1/palm/ready`).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      if (Date.now() > deadline) throw new Error("the API started by compose never became ready");
      await new Promise((r) => setTimeout(r, 1000));
    }
  }, 600_000);
  afterAll(async () => {
    if (project) await compose("down", "-v", "-t", "30").catch(() => undefined);
  }, 120_000);

  it("analyses the sample with a key palmctl made in the API container, the quota counted in Redis", async () => {
    const made = await compose("exec", "-T", "api", "node", "bin/palmctl.mjs", "keys", "create", "--client", "demo", "--plan", "pro");
    const key = /palm_live_[0-9a-f]{32}/.exec(made.stdout)?.[0];
    expect(key).toBeDefined();
    const curl = async () => {
      const { stdout } = await exec(
        "curl",
        ["-sS", "-F", "image=@examples/sample-palm.jpg", "-H", `X-API-Key: ${key}`, `http://127.0.0.1:${port}/v1/palm/analyze`],
        { cwd: root, maxBuffer: 64 * 1024 * 1024 },
      );
      return JSON.parse(stdout);
    };
    const first = await curl();
    expect(first.object).toBe("palm.analysis");
    expect(first.results.reason).toBe("");
    expect(first.usage).toMatchObject({ requests_used: 1, plan: "pro" });
    // Restarted, the API finds the key and the count again: they live in Redis, not in its process.
    await compose("restart", "api");
    const deadline = Date.now() + 120_000;
    while (
      !(await fetch(`http://127.0.0.1:${port}/v1/palm/ready`).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      if (Date.now() > deadline) throw new Error("the API never became ready again after its restart");
      await new Promise((r) => setTimeout(r, 1000));
    }
    const second = await curl();
    expect(second.usage.requests_used).toBe(2);
    expect(second.results.stats).toEqual(first.results.stats);
  }, 300_000);

  it("stops the API with SIGTERM: it drains and exits 0", async () => {
    await compose("stop", "-t", "30", "api");
    const { stdout } = await exec("podman", ["inspect", `${project}_api_1`, "--format", "{{.State.ExitCode}}"]).catch(() =>
      exec("docker", ["inspect", `${project}-api-1`, "--format", "{{.State.ExitCode}}"]),
    );
    expect(stdout.trim()).toBe("0");
    const { stdout: logs } = await compose("logs", "api");
    expect(logs).toMatch(/"msg":"bye"/);
  }, 120_000);
});
