/**
 * `npm start`'s entry point as a process: prints the generated development key once, serves,
 * and on SIGTERM finishes the request in flight, refuses new connections and exits 0; its
 * analysis worker processes end with it, even when it is killed outright.
 */
import net from "node:net";
import { afterAll, describe, expect, it } from "vitest";
import { makeHandPhoto } from "../helpers/images.js";
import { isAlive as alive, processTree } from "../helpers/proc.js";
import { postAnalyze } from "../helpers/rest.js";
import { startServerProcess, type ServerProcess } from "../helpers/server-process.js";

let server: ServerProcess | undefined;
afterAll(() => server?.kill("SIGKILL"));

/** workerPids lists the server's descendants (its analysis workers). */
const workerPids = () => processTree(server!.pid).slice(1);

/** startMain starts the server with a generated development key and returns it with the server. */
async function startMain(): Promise<{ port: number; url: string; devKey: string; output: () => string }> {
  server = await startServerProcess({ PALM_WORKERS: "1", PALM_DEV_KEY: "", LOG_LEVEL: "info" }, [], undefined, { keepOutput: true });
  const devKeyOf = (out: string) => /^\s+(palm_live_[0-9a-f]{32})$/m.exec(out)?.[1];
  await expect.poll(() => devKeyOf(server!.output()), { timeout: 5000 }).toBeDefined();
  return { port: server.port, url: server.url, devKey: devKeyOf(server.output())!, output: server.output };
}

describe("main", () => {
  it("finishes the request in flight on SIGTERM, refuses new connections and exits 0", async () => {
    const { port, url, devKey, output } = await startMain();
    const workers = workerPids();
    expect(workers.length).toBeGreaterThanOrEqual(1);
    // The generated key is printed exactly once and never logged.
    expect(output().split(devKey).length - 1).toBe(1);
    // 12 MP: its analysis alone takes 250-450 ms on the machines measured, so 150 ms after
    // sending the small body the request is received and still analysing, however fast the
    // first request of a new process becomes (a 1.2 MP analysis alone takes ~100 ms here; a
    // 160x120 one was still answered after the signal, only because this first request is slow).
    const image = (await makeHandPhoto()).toString("base64");

    const inFlight = postAnalyze(url, { image }, { "x-api-key": devKey }).then((r) => ({ ...r, at: performance.now() }));
    await new Promise((r) => setTimeout(r, 150));
    const signalledAt = performance.now();
    server!.kill("SIGTERM");

    const { res, json, at } = await inFlight;
    expect(at, "the answer came after the signal: the request was in flight").toBeGreaterThan(signalledAt);
    expect(res.status).toBe(200);
    expect(json.usage.requests_used).toBe(1);
    await new Promise((r) => setTimeout(r, 100));
    const refused = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, "127.0.0.1");
      c.once("connect", () => (c.destroy(), resolve(false)));
      c.once("error", () => resolve(true));
    });
    expect(refused).toBe(true);
    expect(await server!.exited).toBe(0);
    expect(output().split(devKey).length - 1).toBe(1);
    expect(workers.filter(alive), "worker processes left behind").toEqual([]);
  });

  it("leaves no worker process behind when it is killed outright", async () => {
    await startMain();
    const workers = workerPids();
    expect(workers.length).toBeGreaterThanOrEqual(1);
    server!.kill("SIGKILL");
    await server!.exited;
    const until = Date.now() + 15_000;
    while (workers.some(alive) && Date.now() < until) await new Promise((r) => setTimeout(r, 50));
    expect(workers.filter(alive), "worker processes left behind").toEqual([]);
  });
});
