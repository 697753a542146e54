/**
 * The tests' own redis-servers: a server that cannot bind its port (another server holds it) is
 * not mistaken for the one that does, startRedis restarts on the same port, and a machine without
 * redis-server is told so.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { startRedis, type RedisProcess } from "../helpers/redis.js";
import { startRedisCluster } from "../helpers/redis-cluster.js";
import { cli, kill, NodeNotUp, waitServing } from "../helpers/redis-node.js";

describe("test redis-servers", () => {
  const started: RedisProcess[] = [];
  afterAll(async () => {
    for (const r of started) await r.stop();
  });

  it("a server whose port is held by another redis-server is reported exited, not taken for the other", async () => {
    const holder = await startRedis();
    started.push(holder);
    const late = spawn("redis-server", ["--port", String(holder.port), "--bind", "127.0.0.1", "--save", ""], { stdio: "ignore" });
    try {
      // The holder answers PONG on that port all along; only its process id tells the two apart.
      expect((await cli(holder.port, "ping")).trim()).toBe("PONG");
      await expect(waitServing(holder.port, late, 5000)).rejects.toBeInstanceOf(NodeNotUp);
    } finally {
      await kill(late);
    }
    expect((await cli(holder.port, "info", "server")).includes(`process_id:${holder.pid}`)).toBe(true);
  });

  it("startRedis serves as itself, and start() after stop() comes back on the same port", async () => {
    const r = await startRedis();
    started.push(r);
    await cli(r.port, "set", "k", "v");
    const before = r.pid;
    await r.stop();
    await r.start();
    expect(r.pid).not.toBe(before);
    expect(await cli(r.port, "info", "server")).toContain(`process_id:${r.pid}`);
    expect((await cli(r.port, "get", "k")).trim()).toBe(""); // no persistence: a restarted server is empty
  });

  it("without redis-server on PATH, both helpers say it is not installed, not that a port was taken", async () => {
    const empty = mkdtempSync(join(tmpdir(), "palm-no-redis-"));
    const path = process.env.PATH;
    process.env.PATH = empty;
    try {
      await expect(startRedis()).rejects.toThrow(/cannot start redis-server \(is it installed\? see README\)/);
      await expect(startRedisCluster()).rejects.toThrow(/cannot start redis-server \(is it installed\? see README\)/);
    } finally {
      process.env.PATH = path;
      rmSync(empty, { recursive: true, force: true });
    }
  });
});
