/**
 * `npm start`'s entry point as a process: prints the generated development key once, serves,
 * and on SIGTERM finishes the request in flight, refuses new connections and exits 0.
 */
import { spawn, type ChildProcess } from "node:child_process";
import net from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { makeImage } from "../helpers/images.js";
import { postAnalyze } from "../helpers/rest.js";

const root = new URL("../../", import.meta.url).pathname;
let child: ChildProcess | undefined;
afterAll(() => {
  if (child && child.exitCode === null) child.kill("SIGKILL");
});

function startMain(): Promise<{ port: number; devKey: string; output: () => string }> {
  let out = "";
  child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    cwd: root,
    env: { ...process.env, PORT: "0", PALM_WORKERS: "1", PALM_DEV_KEY: "", REDIS_URL: "", LOG_LEVEL: "info" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start-up within 60 s:\n${out}`)), 60_000);
    const check = () => {
      const port = /"port":(\d+)/.exec(out)?.[1];
      const devKey = /^\s+(palm_live_[0-9a-f]{32})$/m.exec(out)?.[1];
      if (port && devKey) {
        clearTimeout(timer);
        resolve({ port: Number(port), devKey, output: () => out });
      }
    };
    child!.stdout!.on("data", check);
    child!.once("exit", (code) => reject(new Error(`exited ${code} during start-up:\n${out}`)));
  });
}

describe("main", () => {
  it("finishes the request in flight on SIGTERM, refuses new connections and exits 0", async () => {
    const { port, devKey, output } = await startMain();
    // The generated key is printed exactly once and never logged.
    expect(output().split(devKey).length - 1).toBe(1);
    const url = `http://127.0.0.1:${port}`;
    const image = (await makeImage(1280, 960)).toString("base64");

    const inFlight = postAnalyze(url, { image }, { "x-api-key": devKey });
    await new Promise((r) => setTimeout(r, 150)); // received and analysing (a 1.2 MP analysis takes longer)
    const exited = new Promise<number | null>((resolve) => child!.once("exit", (code) => resolve(code)));
    child!.kill("SIGTERM");

    const { res, json } = await inFlight;
    expect(res.status).toBe(200);
    expect(json.usage.requests_used).toBe(1);
    await new Promise((r) => setTimeout(r, 100));
    const refused = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, "127.0.0.1");
      c.once("connect", () => (c.destroy(), resolve(false)));
      c.once("error", () => resolve(true));
    });
    expect(refused).toBe(true);
    expect(await exited).toBe(0);
    expect(output().split(devKey).length - 1).toBe(1);
  });
});
