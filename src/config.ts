/**
 * Service configuration: read from the environment once at start-up, validated with one clear
 * message per bad value, then deep-frozen. The README's configuration table mirrors
 * {@link CONFIG_VARIABLES}; test/unit/readme.spec.ts fails when one is missing there.
 */

/** PlanLimits maps a plan name to its monthly allowance of successful analyses. */
export type PlanLimits = Readonly<Record<string, number>>;

/** RedisNode is one `host:port` of REDIS_CLUSTER_NODES. */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/** Config is the validated, frozen service configuration. */
export interface Config {
  /** TCP port for every protocol (gRPC, gRPC-Web, Connect, REST). Default 8080; 0 picks a free port. */
  readonly port: number;
  /** Interface to bind. Default: all interfaces (undefined lets Node choose `::` or `0.0.0.0`). */
  readonly host: string | undefined;
  /** URL of a single Redis; undefined (and no {@link Config.redisClusterNodes}) selects the embedded in-memory store (single process only). */
  readonly redisUrl: string | undefined;
  /** Nodes of a Redis Cluster (any reachable ones); exclusive with {@link Config.redisUrl}. Default undefined. */
  readonly redisClusterNodes: readonly RedisNode[] | undefined;
  /** Prefix of every Redis key, so several deployments or tests can share one Redis. Default "palm:". */
  readonly redisKeyPrefix: string;
  /** Redis command timeout in milliseconds: a hung Redis answers 503 store_unavailable after this. Default 1000. */
  readonly redisCommandTimeoutMs: number;
  /**
   * Lease of a pending quota unit in milliseconds: a unit held by a replica that stopped renewing
   * it (it died) is given back by the store this long after its last renewal. Renewed every third
   * of it while the request runs. Default 30000.
   */
  readonly quotaLeaseMs: number;
  /** Monthly limits per plan. Default {"free":100,"starter":1000,"pro":10000}. */
  readonly planLimits: PlanLimits;
  /** Development key registered for client "dev" on plan "pro" (in-memory store only); undefined → generated. */
  readonly devKey: string | undefined;
  /** Deadline of one Analyze call in milliseconds (a client's shorter grpc-timeout/connect-timeout wins). Default 30000. */
  readonly analyzeTimeoutMs: number;
  /** Time a client has to send all request headers, in milliseconds. Default 10000. */
  readonly headersTimeoutMs: number;
  /** Time a REST client has to send the whole body, in milliseconds (slow-client guard). Default 30000. */
  readonly bodyTimeoutMs: number;
  /** Idle time after which a connection (HTTP/1.1 socket or HTTP/2 session) is closed, ms. Default 60000. */
  readonly idleTimeoutMs: number;
  /** Bound on finishing in-flight requests after SIGTERM/SIGINT, in milliseconds. Default 10000. */
  readonly shutdownGraceMs: number;
  /** Path of the ONNX model; undefined lets the engine use its default (models/palm-lines/palm-lines.onnx). */
  readonly modelPath: string | undefined;
  /** Analysis worker processes; undefined → the engine's default (one per core, at most 4). */
  readonly workers: number | undefined;
  /** Analyses allowed to wait for a worker before 503 overloaded; undefined → engine default (2 x workers). */
  readonly maxQueue: number | undefined;
  /** REST codec worker threads (large JSON bodies off the event loop); undefined → a quarter of the cores, 1 to 4; 0 → inline. */
  readonly restCodecThreads: number | undefined;
  /** OS tuning by the launcher (src/launch/os-tuning.ts): nice values, SCHED_IDLE, CPU pinning. Default "on". */
  readonly osTuning: "on" | "off";
  /** Origins allowed to call the API from a browser (CORS); "*" allows any. Default: none (the page's own origin needs no CORS). */
  readonly corsOrigins: readonly string[];
  /** Port of its own for `GET /metrics`; undefined serves it on {@link Config.port}. */
  readonly metricsPort: number | undefined;
  /** pino log level. Default "info". */
  readonly logLevel: string;
}

/** ConfigVariable documents one environment variable (the README table is checked against these). */
export interface ConfigVariable {
  readonly name: string;
  readonly default: string;
  readonly description: string;
}

/** CONFIG_VARIABLES lists every environment variable {@link loadConfig} reads. */
export const CONFIG_VARIABLES: readonly ConfigVariable[] = Object.freeze([
  { name: "PORT", default: "8080", description: "port for gRPC, gRPC-Web, Connect and REST" },
  { name: "HOST", default: "all interfaces", description: "interface to bind" },
  { name: "REDIS_URL", default: "unset (in-memory store)", description: "Redis for keys and quota" },
  { name: "REDIS_CLUSTER_NODES", default: "unset", description: "Redis Cluster for keys and quota: host:port of some of its nodes, comma-separated (not with REDIS_URL)" },
  { name: "PALM_REDIS_PREFIX", default: "palm:", description: "prefix of every Redis key" },
  { name: "PALM_REDIS_COMMAND_TIMEOUT_MS", default: "1000", description: "Redis command timeout" },
  { name: "PALM_QUOTA_LEASE_MS", default: "30000", description: "lease of a pending quota unit: a dead replica's units are given back after it" },
  { name: "PALM_PLAN_LIMITS", default: '{"free":100,"starter":1000,"pro":10000}', description: "monthly limit per plan (JSON)" },
  { name: "PALM_DEV_KEY", default: "generated and printed", description: "dev key for client dev on plan pro (in-memory store only)" },
  { name: "PALM_ANALYZE_TIMEOUT_MS", default: "30000", description: "deadline of one analysis" },
  { name: "PALM_HEADERS_TIMEOUT_MS", default: "10000", description: "time to receive request headers" },
  { name: "PALM_BODY_TIMEOUT_MS", default: "30000", description: "time to receive a REST body" },
  { name: "PALM_IDLE_TIMEOUT_MS", default: "60000", description: "idle connection timeout" },
  { name: "PALM_SHUTDOWN_GRACE_MS", default: "10000", description: "bound on finishing in-flight requests at shutdown" },
  { name: "PALM_MODEL_PATH", default: "models/palm-lines/palm-lines.onnx", description: "ONNX model file" },
  { name: "PALM_WORKERS", default: "one per CPU core, at most 4", description: "analysis worker processes" },
  { name: "PALM_MAX_QUEUE", default: "2 x workers", description: "analyses waiting before 503 overloaded" },
  { name: "PALM_REST_CODEC_THREADS", default: "a quarter of the cores, 1 to 4", description: "threads decoding large REST bodies and encoding responses (0: on the event loop)" },
  { name: "PALM_OS_TUNING", default: "on", description: "on: engine and codec threads at nice 10, analysis workers under SCHED_IDLE and pinned while all cores are busy, so the event loop comes first (Linux); off: none of it" },
  { name: "PALM_CORS_ORIGINS", default: "none", description: "origins allowed to call the API from a browser, comma-separated, or *" },
  { name: "PALM_METRICS_PORT", default: "unset (the main port)", description: "port of its own for GET /metrics" },
  { name: "LOG_LEVEL", default: "info", description: "pino level: fatal, error, warn, info, debug, trace, silent" },
]);

/**
 * RETIRED_VARIABLES were read once and are refused now, with what replaced them: a deployment
 * that still sets one would otherwise silently get something else than it asked for.
 */
export const RETIRED_VARIABLES: Readonly<Record<string, string>> = Object.freeze({
  PALM_THREAD_NICE: "PALM_OS_TUNING=on|off replaced it (on: nice 10, as its default)",
  PALM_WORKER_SCHED: "PALM_OS_TUNING=on|off replaced it (on: SCHED_IDLE workers, as idle did; off: no tuning at all)",
});

/** DEFAULT_PLAN_LIMITS are SPEC.md section 5's defaults. */
export const DEFAULT_PLAN_LIMITS: PlanLimits = Object.freeze({ free: 100, starter: 1000, pro: 10000 });

/** API_KEY_PATTERN is SPEC.md section 4's key format. */
export const API_KEY_PATTERN = /^palm_live_[0-9a-f]{32}$/;

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

/** ConfigError lists every invalid variable, one line each. */
export class ConfigError extends Error {
  override name = "ConfigError";
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

/**
 * loadConfig validates `env` (default `process.env`) and returns a frozen {@link Config}.
 * Throws {@link ConfigError} naming every bad variable at once.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  const problems: string[] = [];
  const get = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === "" ? undefined : v.trim();
  };
  const int = (name: string, def: number, min: number, max: number): number => {
    const raw = get(name);
    if (raw === undefined) return def;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name}: expected an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
      return def;
    }
    return Number(raw);
  };
  const oneOf = <T extends string>(name: string, values: readonly T[], def: T): T => {
    const raw = get(name);
    if (raw === undefined) return def;
    if (!values.includes(raw as T)) {
      problems.push(`${name}: expected one of ${values.join(", ")}, got ${JSON.stringify(raw)}`);
      return def;
    }
    return raw as T;
  };

  const port = int("PORT", 8080, 0, 65535);
  const redisUrl = get("REDIS_URL");
  if (redisUrl !== undefined && !/^rediss?:\/\//.test(redisUrl)) {
    problems.push(`REDIS_URL: expected redis://host:port or rediss://…, got a value starting ${JSON.stringify(redisUrl.slice(0, 8))}`);
  }
  const redisClusterNodes = parseRedisClusterNodes(get("REDIS_CLUSTER_NODES"), problems);
  if (redisUrl !== undefined && redisClusterNodes !== undefined) {
    problems.push("REDIS_URL and REDIS_CLUSTER_NODES are both set: REDIS_URL names a single Redis, REDIS_CLUSTER_NODES a Redis Cluster; set one");
  }
  const redisKeyPrefix = get("PALM_REDIS_PREFIX") ?? "palm:";
  if (redisClusterNodes !== undefined && /[{}]/.test(redisKeyPrefix)) {
    // A brace in the prefix would change the hash tag that keeps a client's keys in one slot.
    problems.push(`PALM_REDIS_PREFIX: must not contain { or } with REDIS_CLUSTER_NODES, got ${JSON.stringify(redisKeyPrefix)}`);
  }
  const planLimits = parsePlanLimits(get("PALM_PLAN_LIMITS"), problems);
  const devKey = get("PALM_DEV_KEY");
  if (devKey !== undefined && !API_KEY_PATTERN.test(devKey)) {
    problems.push("PALM_DEV_KEY: expected palm_live_ followed by 32 lowercase hex characters");
  }
  const cors = parseCorsOrigins(get("PALM_CORS_ORIGINS"));
  problems.push(...cors.problems);
  for (const [name, replacement] of Object.entries(RETIRED_VARIABLES)) {
    if (get(name) !== undefined) problems.push(`${name}: no longer read; ${replacement}`);
  }
  const logLevel = get("LOG_LEVEL") ?? "info";
  if (!LOG_LEVELS.includes(logLevel)) {
    problems.push(`LOG_LEVEL: expected one of ${LOG_LEVELS.join(", ")}, got ${JSON.stringify(logLevel)}`);
  }
  const config: Config = {
    port,
    host: get("HOST"),
    redisUrl,
    redisClusterNodes,
    redisKeyPrefix,
    redisCommandTimeoutMs: int("PALM_REDIS_COMMAND_TIMEOUT_MS", 1000, 50, 60_000),
    quotaLeaseMs: int("PALM_QUOTA_LEASE_MS", 30_000, 300, 3_600_000),
    planLimits,
    devKey,
    analyzeTimeoutMs: int("PALM_ANALYZE_TIMEOUT_MS", 30_000, 100, 600_000),
    headersTimeoutMs: int("PALM_HEADERS_TIMEOUT_MS", 10_000, 100, 600_000),
    bodyTimeoutMs: int("PALM_BODY_TIMEOUT_MS", 30_000, 100, 600_000),
    idleTimeoutMs: int("PALM_IDLE_TIMEOUT_MS", 60_000, 1000, 3_600_000),
    shutdownGraceMs: int("PALM_SHUTDOWN_GRACE_MS", 10_000, 0, 600_000),
    modelPath: get("PALM_MODEL_PATH"),
    workers: get("PALM_WORKERS") === undefined ? undefined : int("PALM_WORKERS", 1, 1, 256),
    maxQueue: get("PALM_MAX_QUEUE") === undefined ? undefined : int("PALM_MAX_QUEUE", 0, 0, 100_000),
    restCodecThreads: get("PALM_REST_CODEC_THREADS") === undefined ? undefined : int("PALM_REST_CODEC_THREADS", 1, 0, 64),
    osTuning: oneOf("PALM_OS_TUNING", ["on", "off"] as const, "on"),
    corsOrigins: Object.freeze(cors.origins),
    metricsPort: get("PALM_METRICS_PORT") === undefined ? undefined : int("PALM_METRICS_PORT", 0, 0, 65535),
    logLevel,
  };
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config);
}

/**
 * unknownVariables lists `PALM_*` variables that {@link loadConfig} does not read: most likely
 * typos (PALM_PLAN_LIMIT), which main.ts reports as warnings at start-up.
 */
export function unknownVariables(env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  const known = new Set([...CONFIG_VARIABLES.map((v) => v.name), ...Object.keys(RETIRED_VARIABLES)]);
  return Object.keys(env).filter((name) => name.startsWith("PALM_") && !known.has(name));
}

/** createTestConfig returns a frozen {@link Config} with defaults and `overrides` (tests, tools). */
export function createTestConfig(overrides: Partial<Config> = {}): Config {
  return Object.freeze({ ...loadConfig({}), ...overrides });
}

/** parseCorsOrigins reads PALM_CORS_ORIGINS: comma-separated origins or "*"; returns problems. */
export function parseCorsOrigins(raw: string | undefined): { origins: string[]; problems: string[] } {
  if (raw === undefined) return { origins: [], problems: [] };
  const origins: string[] = [];
  const problems: string[] = [];
  for (const part of raw.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    if (part === "*") {
      origins.push(part);
      continue;
    }
    let url: URL | undefined;
    try {
      url = new URL(part);
    } catch {
      url = undefined;
    }
    // An origin is scheme://host[:port] and nothing more: browsers compare it as a string.
    if (!url || !/^https?:$/.test(url.protocol) || url.origin !== part) {
      problems.push(`PALM_CORS_ORIGINS: ${JSON.stringify(part)} is not an origin like https://app.example.com (scheme, host, optional port; no path or trailing slash)`);
      continue;
    }
    origins.push(url.origin);
  }
  return { origins, problems };
}

/**
 * parseRedisClusterNodes reads REDIS_CLUSTER_NODES: comma-separated `host:port` (an IPv6 host in
 * brackets, `[::1]:7000`); undefined when unset. Bad entries are added to `problems`.
 */
export function parseRedisClusterNodes(raw: string | undefined, problems: string[]): readonly RedisNode[] | undefined {
  if (raw === undefined) return undefined;
  const nodes: RedisNode[] = [];
  for (const part of raw.split(",").map((s) => s.trim()).filter((s) => s !== "")) {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(part);
    if (!m || Number(m[3]) < 1 || Number(m[3]) > 65535) {
      problems.push(`REDIS_CLUSTER_NODES: expected host:port, comma-separated (e.g. redis-1:6379,redis-2:6379), got ${JSON.stringify(part)}`);
      continue;
    }
    nodes.push(Object.freeze({ host: m[1] ?? m[2], port: Number(m[3]) }));
  }
  if (nodes.length === 0 && !problems.some((p) => p.startsWith("REDIS_CLUSTER_NODES"))) {
    problems.push("REDIS_CLUSTER_NODES: expected host:port of at least one node");
  }
  return Object.freeze(nodes);
}

function parsePlanLimits(raw: string | undefined, problems: string[]): PlanLimits {
  if (raw === undefined) return DEFAULT_PLAN_LIMITS;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    problems.push('PALM_PLAN_LIMITS: not valid JSON; expected e.g. {"free":100,"starter":1000,"pro":10000}');
    return DEFAULT_PLAN_LIMITS;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed) || Object.keys(parsed).length === 0) {
    problems.push("PALM_PLAN_LIMITS: expected a non-empty JSON object of plan name → monthly limit");
    return DEFAULT_PLAN_LIMITS;
  }
  const limits: Record<string, number> = {};
  for (const [name, limit] of Object.entries(parsed)) {
    if (!/^[a-z0-9_-]{1,32}$/.test(name)) {
      problems.push(`PALM_PLAN_LIMITS: plan name ${JSON.stringify(name)} must be 1-32 of a-z 0-9 _ -`);
    } else if (typeof limit !== "number" || !Number.isSafeInteger(limit) || limit < 0) {
      problems.push(`PALM_PLAN_LIMITS: limit of plan ${JSON.stringify(name)} must be a non-negative integer`);
    } else {
      limits[name] = limit;
    }
  }
  return Object.freeze(limits);
}
