import { describe, expect, expectTypeOf, it } from "vitest";
import {
  CONFIG_SCHEMA,
  ConfigError,
  DEFAULT_PLAN_LIMITS,
  loadConfig,
  unknownVariables,
  type Config,
  type RedisNode,
} from "../../src/config.js";

describe("loadConfig()", () => {
  it("returns frozen defaults for an empty environment", () => {
    const c = loadConfig({});
    expect(c.port).toBe(8080);
    expect(c.redisUrl).toBeUndefined();
    expect(c.planLimits).toEqual({ free: 100, starter: 1000, pro: 10000 });
    expect(c.planLimits).toBe(DEFAULT_PLAN_LIMITS);
    expect(c.analyzeTimeoutMs).toBe(30_000);
    expect(Object.isFrozen(c)).toBe(true);
    expect(Object.isFrozen(c.planLimits)).toBe(true);
  });

  it("has one field per schema entry, typed by its parser (checked by npm run typecheck)", () => {
    expect(Object.keys(loadConfig({})).sort()).toEqual(Object.keys(CONFIG_SCHEMA).sort());
    expectTypeOf<Config["port"]>().toEqualTypeOf<number>();
    expectTypeOf<Config["workers"]>().toEqualTypeOf<number | undefined>();
    expectTypeOf<Config["host"]>().toEqualTypeOf<string | undefined>();
    expectTypeOf<Config["redisKeyPrefix"]>().toEqualTypeOf<string>();
    expectTypeOf<Config["redisClusterNodes"]>().toEqualTypeOf<readonly RedisNode[] | undefined>();
    expectTypeOf<Config["corsOrigins"]>().toEqualTypeOf<readonly string[]>();
  });

  it("treats a blank value as unset and trims the others", () => {
    expect(loadConfig({ PORT: "  ", PALM_REDIS_PREFIX: " x: ", PALM_WORKERS: " 3 " })).toMatchObject({
      port: 8080,
      redisKeyPrefix: "x:",
      workers: 3,
    });
  });

  it("reads every variable", () => {
    const c = loadConfig({
      PORT: "9000",
      REDIS_URL: "redis://r:6379",
      PALM_REDIS_PREFIX: "x:",
      PALM_PLAN_LIMITS: '{"gold":5}',
      PALM_DEV_KEY: "palm_live_0123456789abcdef0123456789abcdef",
      PALM_ANALYZE_TIMEOUT_MS: "5000",
      PALM_WORKERS: "3",
      LOG_LEVEL: "debug",
    });
    expect(c).toMatchObject({
      port: 9000,
      redisUrl: "redis://r:6379",
      redisKeyPrefix: "x:",
      planLimits: { gold: 5 },
      devKey: "palm_live_0123456789abcdef0123456789abcdef",
      analyzeTimeoutMs: 5000,
      workers: 3,
      logLevel: "debug",
    });
  });

  it("names every bad variable at once with a clear message", () => {
    let err: unknown;
    try {
      loadConfig({
        PORT: "http",
        REDIS_URL: "localhost:6379",
        PALM_PLAN_LIMITS: '{"free":-1}',
        PALM_DEV_KEY: "palm_live_XYZ",
        PALM_ANALYZE_TIMEOUT_MS: "1.5",
        LOG_LEVEL: "loud",
        PALM_WORKERS: "0",
      });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    const problems = (err as ConfigError).problems;
    expect(problems).toHaveLength(7);
    expect(problems[0]).toBe('PORT: expected an integer from 0 to 65535, got "http"');
    expect(problems.join("\n")).toMatch(/REDIS_URL: expected redis:\/\//);
    expect(problems.join("\n")).toMatch(/PALM_PLAN_LIMITS: limit of plan "free" must be a non-negative integer/);
    expect(problems.join("\n")).toMatch(/PALM_DEV_KEY: expected palm_live_ followed by 32 lowercase hex/);
    expect(problems.join("\n")).toMatch(/PALM_ANALYZE_TIMEOUT_MS: expected an integer/);
    expect(problems.join("\n")).toMatch(/LOG_LEVEL: expected one of/);
    expect(problems.join("\n")).toMatch(/PALM_WORKERS: expected an integer/);
  });

  it("refuses the variables of the removed OS tuning, saying so", () => {
    let err: unknown;
    try {
      loadConfig({ PALM_WORKER_SCHED: "normal", PALM_THREAD_NICE: "10", PALM_OS_TUNING: "on" });
    } catch (e) {
      err = e;
    }
    expect((err as ConfigError).problems).toEqual([
      "PALM_THREAD_NICE: no longer read; the OS tuning was removed: threads keep the priority they start with (docs/decisions/os-tuning.md)",
      "PALM_WORKER_SCHED: no longer read; the OS tuning was removed: workers run under the normal policy (docs/decisions/os-tuning.md)",
      "PALM_OS_TUNING: no longer read; the OS tuning was removed (docs/decisions/os-tuning.md): nothing to turn on or off",
    ]);
    expect(unknownVariables({ PALM_WORKER_SCHED: "normal" }), "refused, not also reported as a typo").toEqual([]);
  });

  it("accepts PALM_OS_TUNING=off, the old default: it asks for what now always happens", () => {
    expect(() => loadConfig({ PALM_OS_TUNING: "off" })).not.toThrow();
    expect(unknownVariables({ PALM_OS_TUNING: "off" })).toEqual([]);
  });

  it("reads PALM_CORS_ORIGINS as a list of origins or *, and PALM_METRICS_PORT", () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({}).metricsPort).toBeUndefined();
    const c = loadConfig({ PALM_CORS_ORIGINS: " https://app.example.com, http://localhost:5173 ", PALM_METRICS_PORT: "9464" });
    expect(c.corsOrigins).toEqual(["https://app.example.com", "http://localhost:5173"]);
    expect(Object.isFrozen(c.corsOrigins)).toBe(true);
    expect(c.metricsPort).toBe(9464);
    expect(loadConfig({ PALM_CORS_ORIGINS: "*" }).corsOrigins).toEqual(["*"]);
  });

  it("rejects a CORS origin with a path, a trailing slash or no scheme, and a bad PALM_METRICS_PORT", () => {
    let err: unknown;
    try {
      loadConfig({ PALM_CORS_ORIGINS: "https://app.example.com/,app.example.com,https://a.example.com/x", PALM_METRICS_PORT: "70000" });
    } catch (e) {
      err = e;
    }
    const problems = (err as ConfigError).problems;
    expect(problems).toEqual([
      'PALM_CORS_ORIGINS: "https://app.example.com/" is not an origin like https://app.example.com (scheme, host, optional port; no path or trailing slash)',
      'PALM_CORS_ORIGINS: "app.example.com" is not an origin like https://app.example.com (scheme, host, optional port; no path or trailing slash)',
      'PALM_CORS_ORIGINS: "https://a.example.com/x" is not an origin like https://app.example.com (scheme, host, optional port; no path or trailing slash)',
      'PALM_METRICS_PORT: expected an integer from 0 to 65535, got "70000"',
    ]);
  });

  it("reads REDIS_CLUSTER_NODES as host:port nodes, IPv6 in brackets", () => {
    expect(loadConfig({}).redisClusterNodes).toBeUndefined();
    const c = loadConfig({ REDIS_CLUSTER_NODES: " redis-1:7000, 10.0.0.2:7001,[::1]:7002 " });
    expect(c.redisClusterNodes).toEqual([
      { host: "redis-1", port: 7000 },
      { host: "10.0.0.2", port: 7001 },
      { host: "::1", port: 7002 },
    ]);
    expect(c.redisUrl).toBeUndefined();
    expect(Object.isFrozen(c.redisClusterNodes)).toBe(true);
  });

  it("refuses REDIS_URL and REDIS_CLUSTER_NODES together, bad nodes, and a braced prefix on a cluster", () => {
    const problems = (env: Record<string, string>) => {
      try {
        loadConfig(env);
      } catch (e) {
        return (e as ConfigError).problems;
      }
      return [];
    };
    expect(problems({ REDIS_URL: "redis://r:6379", REDIS_CLUSTER_NODES: "r:7000" })).toEqual([
      "REDIS_URL and REDIS_CLUSTER_NODES are both set: REDIS_URL names a single Redis, REDIS_CLUSTER_NODES a Redis Cluster; set one",
    ]);
    expect(problems({ REDIS_CLUSTER_NODES: "r:7000,redis://r:7001,r,r:0,r:65536" })).toEqual([
      'REDIS_CLUSTER_NODES: expected host:port, comma-separated (e.g. redis-1:6379,redis-2:6379), got "redis://r:7001"',
      'REDIS_CLUSTER_NODES: expected host:port, comma-separated (e.g. redis-1:6379,redis-2:6379), got "r"',
      'REDIS_CLUSTER_NODES: expected host:port, comma-separated (e.g. redis-1:6379,redis-2:6379), got "r:0"',
      'REDIS_CLUSTER_NODES: expected host:port, comma-separated (e.g. redis-1:6379,redis-2:6379), got "r:65536"',
    ]);
    expect(problems({ REDIS_CLUSTER_NODES: ", ," })).toEqual(["REDIS_CLUSTER_NODES: expected host:port of at least one node"]);
    expect(problems({ REDIS_CLUSTER_NODES: "r:7000", PALM_REDIS_PREFIX: "{palm}:" })).toEqual([
      'PALM_REDIS_PREFIX: must not contain { or } with REDIS_CLUSTER_NODES, got "{palm}:"',
    ]);
    // A single Redis keeps accepting any prefix.
    expect(loadConfig({ REDIS_URL: "redis://r:6379", PALM_REDIS_PREFIX: "{palm}:" }).redisKeyPrefix).toBe("{palm}:");
  });

  it("reads PALM_RATE_LIMITS over the defaults, and names a bad plan or field", () => {
    const config = loadConfig({ PALM_RATE_LIMITS: '{"free":{"rate":0.5,"burst":3,"concurrency":1}}' });
    expect(config.rateLimits.free).toEqual({ rate: 0.5, burst: 3, concurrency: 1 });
    expect(config.rateLimits.pro).toEqual({ rate: 20, burst: 50, concurrency: 8 });
    expect(config.rateLimits["*"]).toEqual({ rate: 10, burst: 20, concurrency: 4 });
    expect(() => loadConfig({ PALM_RATE_LIMITS: '{"free":{"rate":1,"burst":0,"concurrency":1}}' })).toThrow(
      /PALM_RATE_LIMITS: plan "free": burst must be an integer of at least 1/,
    );
    expect(() => loadConfig({ PALM_RATE_LIMITS: '{"free":{"rate":1,"burst":1,"concurrency":1,"per":"minute"}}' })).toThrow(
      /PALM_RATE_LIMITS: plan "free": unknown field "per"/,
    );
    expect(() => loadConfig({ PALM_RATE_LIMITS: "[]" })).toThrow(/PALM_RATE_LIMITS: expected a JSON object/);
  });

  it("rejects PALM_PLAN_LIMITS that is not a JSON object", () => {
    expect(() => loadConfig({ PALM_PLAN_LIMITS: "[1]" })).toThrow(/PALM_PLAN_LIMITS: expected a non-empty JSON object/);
    expect(() => loadConfig({ PALM_PLAN_LIMITS: "{" })).toThrow(/PALM_PLAN_LIMITS: not valid JSON/);
  });
});

describe("unknownVariables()", () => {
  it("lists PALM_* variables nobody reads", () => {
    expect(unknownVariables({ PALM_PLAN_LIMIT: "{}", PALM_PLAN_LIMITS: "{}", PATH: "/bin" })).toEqual(["PALM_PLAN_LIMIT"]);
  });
});
