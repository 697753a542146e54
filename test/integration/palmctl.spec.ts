/**
 * `npx palmctl` (bin/palmctl.mjs, and runPalmctl in-process) against a real Redis and a real
 * three-master Redis Cluster, with a real server using its keys.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRedisStore, type RedisStore } from "../../src/auth/redis-store.js";
import { runPalmctl } from "../../src/cli/palmctl.js";
import type { EngineAnalyzer } from "../../src/inference/analyzer.js";
import { createTestAnalyzer } from "../helpers/analyzer.js";
import { buildDist } from "../helpers/dist.js";
import { makeImage } from "../helpers/images.js";
import { parseRedisClusterNodes } from "../../src/config.js";
import { startRedis, uniquePrefix, type RedisProcess } from "../helpers/redis.js";
import { startRedisCluster, type RedisClusterProcess } from "../helpers/redis-cluster.js";
import { expectErrorBody, postAnalyze } from "../helpers/rest.js";
import { startServer, type TestServer } from "../helpers/server.js";

const run = promisify(execFile);
const root = new URL("../../", import.meta.url).pathname;
const prefix = uniquePrefix();
let redis: RedisProcess;
let analyzer: EngineAnalyzer;
let store: RedisStore;
let srv: TestServer;
let image: string;

beforeAll(async () => {
  let jpeg: Buffer;
  // bin/palmctl.mjs runs the compiled CLI.
  [redis, analyzer, jpeg] = await Promise.all([startRedis(), createTestAnalyzer(), makeImage(128, 128), buildDist()]);
  image = jpeg.toString("base64");
  store = createRedisStore({ url: redis.url, keyPrefix: prefix });
  await store.ready(5000);
  srv = await startServer({ analyzer, store });
});
afterAll(async () => {
  await srv?.close();
  await store?.close();
  await analyzer?.close();
  await redis?.stop();
});

const env = () => ({ ...process.env, REDIS_URL: redis.url, PALM_REDIS_PREFIX: prefix });

/** palmctlBin runs the real `bin/palmctl.mjs` (what `npx palmctl` runs). */
async function palmctlBin(...args: string[]): Promise<string[]> {
  const { stdout } = await run(process.execPath, ["bin/palmctl.mjs", ...args], { cwd: root, env: env() });
  return stdout.trimEnd().split("\n");
}

/** palmctl runs the same command in-process against the same Redis (no process start-up per call). */
async function palmctl(...args: string[]): Promise<string[]> {
  const out: string[] = [];
  const code = await runPalmctl(args, { env: env(), stdout: (l) => out.push(l), stderr: (l) => out.push(l) });
  expect(code, out.join("\n")).toBe(0);
  return out;
}

describe("palmctl", () => {
  it("creates a key the server accepts, reports usage, and revokes it", async () => {
    const key = (await palmctlBin("keys", "create", "--client", "acme", "--plan", "starter")).at(-1)!;
    expect(key).toMatch(/^palm_live_[0-9a-f]{32}$/);

    const ok = await postAnalyze(srv.url, { image }, { "x-api-key": key });
    expect(ok.res.status).toBe(200);
    expect(ok.json.usage).toMatchObject({ requests_used: 1, requests_limit: 1000, plan: "starter" });

    expect((await palmctl("usage", "--client", "acme")).at(-1)).toMatch(/^client acme plan starter period \S+: used 1 of 1000 /);
    await palmctl("keys", "revoke", key);
    const revoked = await postAnalyze(srv.url, { image }, { "x-api-key": key });
    expectErrorBody(revoked.res, revoked.json, 401, "invalid_api_key");
    expect((await palmctl("keys", "list", "--client", "acme"))[1]).toMatch(/^[0-9a-f]{12} {2}\S+Z {2}\S+Z$/);
  });

  it("sets a plan's per-client limits, which the server applies from the store", async () => {
    const key = (await palmctl("keys", "create", "--client", "limited", "--plan", "pro")).at(-1)!;
    expect((await palmctl("plans", "rate-limit", "--plan", "pro")).at(-1)).toBe(
      "plan pro: 20 requests per second, 50 at once, 8 in flight per client (from the configuration)",
    );
    const set = await palmctlBin("plans", "set-rate-limit", "--plan", "pro", "--rate", "0.01", "--burst", "1", "--concurrency", "3");
    expect(set.at(-1)).toBe("plan pro: 0.01 requests per second, 1 at once, 3 in flight per client (every replica within 5 s)");
    expect((await palmctl("plans", "rate-limit", "--plan", "pro")).at(-1)).toMatch(/\(set by palmctl\)$/);
    expect((await postAnalyze(srv.url, { image }, { "x-api-key": key })).res.status).toBe(200);
    const refused = await postAnalyze(srv.url, { image }, { "x-api-key": key });
    expectErrorBody(refused.res, refused.json, 429, "rate_limited");
    expect(refused.res.headers.get("ratelimit-policy")).toBe('"burst";q=1;w=100');
  });

  it("exits 1 within a few seconds when Redis is unreachable", async () => {
    // It hung here before: QUIT waited for a Redis that was never there.
    await expectQuickExit({ REDIS_URL: "redis://127.0.0.1:1" });
  });

  it("prints the help of every command with --help, exit 0, without Redis", async () => {
    for (const args of [
      ["--help"],
      ["help"],
      ["keys", "--help"],
      ["keys", "create", "--help"],
      ["keys", "revoke", "-h"],
      ["usage", "--help"],
      ["clients", "set-plan", "--help"],
    ]) {
      const { stdout } = await run(process.execPath, ["bin/palmctl.mjs", ...args], { cwd: root, env: { ...process.env, REDIS_URL: "" } });
      expect(stdout, args.join(" ")).toMatch(/^usage:\n {2}palmctl /);
    }
    const { stdout } = await run(process.execPath, ["bin/palmctl.mjs", "keys", "create", "--help"], {
      cwd: root,
      env: { ...process.env, REDIS_URL: "" },
    });
    expect(stdout).toContain("palmctl keys create --client ID [--plan NAME]");
    expect(stdout).not.toContain("set-plan");
  });
});

describe("palmctl on a Redis Cluster", () => {
  let cluster: RedisClusterProcess;
  let clusterStore: RedisStore;
  let clusterSrv: TestServer;
  const clusterPrefix = uniquePrefix();
  beforeAll(async () => {
    cluster = await startRedisCluster();
    clusterStore = createRedisStore({ clusterNodes: parseRedisClusterNodes(cluster.nodes, []), keyPrefix: clusterPrefix });
    await clusterStore.ready(5000);
    clusterSrv = await startServer({ analyzer, store: clusterStore });
  });
  afterAll(async () => {
    await clusterSrv?.close();
    await clusterStore?.close();
    await cluster?.stop();
  });

  // Only the last node is named: the others are learnt from it.
  const clusterEnv = () => ({
    ...process.env,
    REDIS_URL: "",
    REDIS_CLUSTER_NODES: `127.0.0.1:${cluster.ports[2]}`,
    PALM_REDIS_PREFIX: clusterPrefix,
  });
  const bin = async (...args: string[]) =>
    (await run(process.execPath, ["bin/palmctl.mjs", ...args], { cwd: root, env: clusterEnv() })).stdout.trimEnd().split("\n");

  it("creates keys the server accepts, lists them, reports usage, and revokes one by hash prefix", async () => {
    const keys: string[] = [];
    for (const client of ["acme", "globex", "initech"])
      keys.push((await bin("keys", "create", "--client", client, "--plan", "starter")).at(-1)!);
    const second = (await bin("keys", "create", "--client", "acme")).at(-1)!;
    for (const key of [...keys, second]) {
      expect(key).toMatch(/^palm_live_[0-9a-f]{32}$/);
      expect((await postAnalyze(clusterSrv.url, { image }, { "x-api-key": key })).res.status).toBe(200);
    }
    expect((await bin("usage", "--client", "acme")).at(-1)).toMatch(/^client acme plan starter period \S+: used 2 of 1000 /);
    expect((await bin("usage", "--client", "globex")).at(-1)).toMatch(/^client globex plan starter period \S+: used 1 of 1000 /);
    const listed = await bin("keys", "list", "--client", "acme");
    expect(listed).toHaveLength(3);
    const prefixOfSecond = createHash("sha256").update(second).digest("hex").slice(0, 12);
    expect(listed.filter((l) => l.startsWith(prefixOfSecond))).toHaveLength(1);

    expect(await bin("keys", "revoke", prefixOfSecond)).toEqual([`revoked key ${prefixOfSecond}…`]);
    const revoked = await postAnalyze(clusterSrv.url, { image }, { "x-api-key": second });
    expectErrorBody(revoked.res, revoked.json, 401, "invalid_api_key");
    expect((await postAnalyze(clusterSrv.url, { image }, { "x-api-key": keys[0] })).res.status).toBe(200);
    const after = await bin("keys", "list", "--client", "acme");
    expect(after.find((l) => l.startsWith(prefixOfSecond))).toMatch(/^[0-9a-f]{12} {2}\S+Z {2}\S+Z$/);
    expect(after.filter((l) => / -$/.test(l))).toHaveLength(1);
  });

  it("exits 1 within a few seconds when the cluster is unreachable", async () => {
    await expectQuickExit({ REDIS_URL: "", REDIS_CLUSTER_NODES: "127.0.0.1:1" });
  });
});

/**
 * expectQuickExit runs `palmctl usage` against an unreachable store: exit 1, "redis not ready", on its
 * own (palmctl gives up after its connect timeout; a palmctl that hangs is killed at 20 s and fails).
 */
async function expectQuickExit(env: Record<string, string>): Promise<void> {
  const result = await run(process.execPath, ["bin/palmctl.mjs", "usage", "--client", "acme"], {
    cwd: root,
    env: { ...process.env, ...env },
    timeout: 20_000,
  }).then(
    () => ({ code: 0, stderr: "", killed: false }),
    (e: { code: number; stderr: string; killed: boolean }) => e,
  );
  expect(result.killed).toBe(false);
  expect(result.code).toBe(1);
  expect(result.stderr).toMatch(/redis not ready/);
}
