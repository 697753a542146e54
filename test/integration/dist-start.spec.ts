/**
 * `npm start` runs compiled code: the server from dist/ with package.json's Node flags, its
 * analysis workers from dist/ too, and no tsx or esbuild anywhere in its process tree. It
 * answers health and the README's sample over REST with the key it prints, and leaves its own
 * threads and its workers' under the normal scheduling policy (the OS tuning was removed).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildDist } from "../helpers/dist.js";
import { processTree, schedPolicies } from "../helpers/proc.js";
import { postAnalyze } from "../helpers/rest.js";

const root = new URL("../../", import.meta.url).pathname;
let child: ChildProcess | undefined;
afterAll(() => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
});
beforeAll(buildDist, 180_000);

const SCHED_OTHER = 0;
const cmdline = (pid: number) => readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);

describe("npm start", () => {
  it("runs the compiled server and workers without tsx, and answers an analysis", async () => {
    const start: string = JSON.parse(readFileSync(`${root}/package.json`, "utf8")).scripts.start;
    const [node, ...args] = start.trim().split(/\s+/);
    expect(node).toBe("node");
    expect(args.at(-1)).toBe("dist/src/main.js");

    let out = "";
    child = spawn(process.execPath, args, {
      cwd: root,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", PALM_WORKERS: "1", PALM_DEV_KEY: "", REDIS_URL: "", LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const { port, devKey } = await new Promise<{ port: number; devKey: string }>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start-up within 60 s:\n${out}`)), 60_000);
      child!.stdout!.on("data", () => {
        const port = /"port":(\d+)/.exec(out)?.[1];
        const devKey = /^\s+(palm_live_[0-9a-f]{32})$/m.exec(out)?.[1];
        if (port && devKey) {
          clearTimeout(timer);
          resolve({ port: Number(port), devKey });
        }
      });
      child!.once("exit", (code) => reject(new Error(`exited ${code} during start-up:\n${out}`)));
    });
    expect(out, "npm start passes its own flags").not.toContain("started without the Node flags");

    const url = `http://127.0.0.1:${port}`;
    expect((await fetch(`${url}/v1/palm/health`)).status).toBe(200);
    const image = readFileSync(`${root}/examples/sample-palm.jpg`).toString("base64");
    const { res, json } = await postAnalyze(url, { image }, { "x-api-key": devKey });
    expect(res.status).toBe(200);
    expect(json.object).toBe("palm.analysis");

    const tree = processTree(child.pid!);
    const lines = tree.map((pid) => cmdline(pid).join(" "));
    expect(lines.length, lines.join("\n")).toBeGreaterThanOrEqual(2); // the server and its worker
    expect(
      lines.filter((l) => l.includes("dist/src/inference/inference-worker.js")),
      lines.join("\n"),
    ).toHaveLength(1);
    // tsx would show as a flag of the server or a worker, or as its esbuild service process.
    for (const line of lines) expect(line).not.toMatch(/tsx|esbuild/);

    const worker = tree[lines.findIndex((l) => l.includes("inference-worker.js"))];
    expect(new Set(schedPolicies(worker).values())).toEqual(new Set([SCHED_OTHER]));
    expect(new Set(schedPolicies(child.pid!).values()), "the server's own threads").toEqual(new Set([SCHED_OTHER]));

    const exited = new Promise<number | null>((resolve) => child!.once("exit", (code) => resolve(code)));
    child.kill("SIGTERM");
    expect(await exited).toBe(0);
  });
});
