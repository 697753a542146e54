/**
 * The container image, run: starts the image the Dockerfile built (read-only root, as the
 * Kubernetes manifests run it), analyses examples/sample-palm.jpg through it, checks what it
 * holds, serves it from a real Redis with compose.yaml's environment and a key made by palmctl
 * inside it, and stops it with SIGTERM. Building takes minutes and the network, so the suite does not
 * build it: it runs when PALM_CONTAINER_IMAGE names an image podman has (e.g.
 * localhost/palm-api:latest), and skips saying why otherwise (docs/operations.md, "Container image").
 * PALM_PODMAN_ARGS passes global podman options (this project's VM needs "--runtime runc").
 */
import { execFile, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { generateApiKey } from "../../src/auth/api-key.js";
import { freePort } from "../helpers/ports.js";
import { startRedis } from "../helpers/redis.js";

const exec = promisify(execFile);
/** Global podman options this machine needs, e.g. "--runtime runc" (PALM_PODMAN_ARGS, split on spaces). */
const PODMAN_ARGS = (process.env.PALM_PODMAN_ARGS ?? "").split(" ").filter(Boolean);
const run = (cmd: "podman", args: string[]) => exec(cmd, [...PODMAN_ARGS, ...args]);
const IMAGE = process.env.PALM_CONTAINER_IMAGE ?? "";
const why = (() => {
  if (IMAGE === "") return "PALM_CONTAINER_IMAGE is not set (an image built from the Dockerfile)";
  const p = spawnSync("podman", [...PODMAN_ARGS, "image", "exists", IMAGE]);
  if (p.error) return "podman is not installed";
  return p.status === 0 ? undefined : `podman has no image ${IMAGE} (build it: docs/operations.md, "Container image")`;
})();
if (why) console.warn(`container.spec.ts: skipped: ${why}`);

const sample = readFileSync(new URL("../../examples/sample-palm.jpg", import.meta.url));
const key = generateApiKey();
let name: string;
let url: string;

describe.skipIf(why !== undefined)(`the image ${IMAGE}${why ? ` [skipped: ${why}]` : ""}`, () => {
  beforeAll(async () => {
    const port = await freePort();
    name = `palm-test-${port}`;
    url = `http://127.0.0.1:${port}`;
    // Host networking: the test needs no port mapping, which not every podman set-up can do.
    await run("podman", [
      ...["run", "-d", "--name", name, "--network", "host", "--read-only", "--tmpfs", "/tmp"],
      ...["-e", `PORT=${port}`, "-e", `PALM_DEV_KEY=${key}`, "-e", "PALM_WORKERS=1", IMAGE],
    ]);
    const deadline = Date.now() + 90_000;
    for (;;) {
      const ready = await fetch(`${url}/v1/palm/ready`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ready) break;
      if (Date.now() > deadline) throw new Error(`the container never became ready: ${(await logs()).slice(-2000)}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }, 120_000);
  afterAll(async () => {
    if (name) await run("podman", ["rm", "-f", name]).catch(() => undefined);
  });

  const logs = async () => {
    const { stdout, stderr } = await run("podman", ["logs", name]).catch((e) => e);
    return `${stdout}${stderr}`;
  };

  it("analyses examples/sample-palm.jpg uploaded as a file, as the README says", async () => {
    const form = new FormData();
    form.append("image", new Blob([new Uint8Array(sample)]), "sample-palm.jpg");
    const res = await fetch(`${url}/v1/palm/analyze`, { method: "POST", headers: { "x-api-key": key }, body: form });
    expect(res.status).toBe(200);
    const json = await res.json();
    expect(json.object).toBe("palm.analysis");
    expect(json.results.reason).toBe("");
    expect(json.results.stats.heart.detected).toBe(true);
    expect(json.model).toMatch(/^palm-lines-/);
  });

  it("runs as user 10001 and holds no compiler, TypeScript or dev dependency", async () => {
    const devDependencies = Object.keys(JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")).devDependencies);
    const script = [
      "id -u",
      "for c in gcc cc g++ make python3 tsc; do command -v $c; done",
      `for d in ${devDependencies.join(" ")} onnxruntime-node sharp; do [ -e node_modules/$d/package.json ] && echo "package $d"; done`,
    ].join("; ");
    const { stdout } = await run("podman", ["exec", name, "sh", "-c", `${script}; true`]);
    const [uid, ...rest] = stdout.trim().split("\n");
    expect(uid).toBe("10001");
    // No compiler on PATH, and of the packages only the production ones.
    expect(rest).toEqual(["package onnxruntime-node", "package sharp"]);
  });

  it("serves from Redis as compose.yaml runs it: a key made with palmctl in the container, the README's curl upload", async () => {
    const compose = (await import("yaml")).parse(readFileSync(new URL("../../compose.yaml", import.meta.url), "utf8"));
    const redis = await startRedis();
    const port = await freePort();
    const api = `palm-test-redis-${port}`;
    try {
      const env = { ...compose.services.api.environment, REDIS_URL: redis.url, PORT: String(port), PALM_WORKERS: "1" };
      await run("podman", [
        "run",
        "-d",
        "--name",
        api,
        "--network",
        "host",
        ...Object.entries(env).flatMap(([k, v]) => ["-e", `${k}=${v}`]),
        IMAGE,
      ]);
      const deadline = Date.now() + 90_000;
      while (
        !(await fetch(`http://127.0.0.1:${port}/v1/palm/ready`).then(
          (r) => r.ok,
          () => false,
        ))
      ) {
        if (Date.now() > deadline) throw new Error("the Redis-backed container never became ready");
        await new Promise((r) => setTimeout(r, 500));
      }
      // The command docs/operations.md gives for compose, with REDIS_URL from the container's environment.
      const made = await run("podman", ["exec", api, "node", "bin/palmctl.mjs", "keys", "create", "--client", "demo", "--plan", "pro"]);
      const redisKey = made.stdout.trim().split("\n").pop()!;
      expect(redisKey).toMatch(/^palm_live_[0-9a-f]{32}$/);
      const { stdout } = await exec(
        "curl",
        ["-sS", "-F", "image=@examples/sample-palm.jpg", "-H", `X-API-Key: ${redisKey}`, `http://127.0.0.1:${port}/v1/palm/analyze`],
        {
          cwd: new URL("../../", import.meta.url).pathname,
          maxBuffer: 64 * 1024 * 1024,
        },
      );
      const json = JSON.parse(stdout);
      expect(json.object).toBe("palm.analysis");
      expect(json.usage).toMatchObject({ requests_used: 1, plan: "pro" });
    } finally {
      await run("podman", ["rm", "-f", api]).catch(() => undefined);
      await redis.stop();
    }
  });

  it("stops on SIGTERM after draining, with exit code 0", async () => {
    await run("podman", ["kill", "--signal", "TERM", name]);
    const { stdout } = await run("podman", ["wait", name]);
    expect(stdout.trim()).toBe("0");
    expect(await logs()).toMatch(/"msg":"bye"/);
  });
});
