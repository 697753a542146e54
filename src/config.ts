/**
 * Service configuration: one schema, {@link CONFIG_SCHEMA}, gives the {@link Config} type, the
 * validation and defaults of {@link loadConfig}, and the configuration table of
 * docs/operations.md ({@link renderConfigTable}; test/unit/readme.spec.ts fails when the two
 * differ). Read from the environment once at start-up, every bad value named, then deep-frozen.
 */

/** PlanLimits maps a plan name to its monthly allowance of successful analyses. */
export type PlanLimits = Readonly<Record<string, number>>;

/** RateLimit is one plan's per-client limits (src/auth/rate-limit.ts applies them). */
export interface RateLimit {
  /** Requests per second, sustained (> 0; fractions allowed: 0.5 is one every 2 s). */
  readonly rate: number;
  /** Requests that may arrive at once after a quiet spell (>= 1). */
  readonly burst: number;
  /** Requests of one client in flight at once, across replicas (>= 1). */
  readonly concurrency: number;
}

/** PlanRateLimits maps a plan name, or `*` for every other plan, to its {@link RateLimit}. */
export type PlanRateLimits = Readonly<Record<string, RateLimit>>;

/** RedisNode is one `host:port` of REDIS_CLUSTER_NODES. */
export interface RedisNode {
  readonly host: string;
  readonly port: number;
}

/**
 * Parser reads one variable's trimmed value (undefined when unset or blank) and returns the
 * value or the default; each problem goes to `problems`, prefixed with the variable's `name`.
 */
export type Parser<T> = (raw: string | undefined, name: string, problems: string[]) => T;

/** Variable is one environment variable of the schema: its parser and its row in the docs. */
export interface Variable<T> {
  /** The environment variable. */
  readonly name: string;
  readonly parse: Parser<T>;
  /** The docs table's "default" cell (Markdown). */
  readonly default: string;
  /** The docs table's "meaning" cell (Markdown). */
  readonly meaning: string;
}

const variable = <T>(v: Variable<T>): Variable<T> => v;

/** integer: a whole number from `min` to `max`; `def` when unset (undefined: the engine decides). */
function integer<D extends number | undefined>(def: D, min: number, max: number): Parser<number | D> {
  return (raw, name, problems) => {
    if (raw === undefined) return def;
    if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > max) {
      problems.push(`${name}: expected an integer from ${min} to ${max}, got ${JSON.stringify(raw)}`);
      return def;
    }
    return Number(raw);
  };
}

function oneOf<T extends string>(values: readonly T[], def: T): Parser<T> {
  return (raw, name, problems) => {
    if (raw === undefined) return def;
    if (!values.includes(raw as T)) {
      problems.push(`${name}: expected one of ${values.join(", ")}, got ${JSON.stringify(raw)}`);
      return def;
    }
    return raw as T;
  };
}

function text<D extends string | undefined>(def: D): Parser<string | D> {
  return (raw) => raw ?? def;
}

/** DEFAULT_PLAN_LIMITS are SPEC.md section 5's defaults. */
export const DEFAULT_PLAN_LIMITS: PlanLimits = Object.freeze({ free: 100, starter: 1000, pro: 10000 });

/**
 * DEFAULT_RATE_LIMITS: per client, by plan; `*` is every plan not named. A free client may send
 * 10 at once and then one a second, with 2 in flight.
 */
export const DEFAULT_RATE_LIMITS: PlanRateLimits = Object.freeze({
  free: Object.freeze({ rate: 1, burst: 10, concurrency: 2 }),
  starter: Object.freeze({ rate: 5, burst: 20, concurrency: 4 }),
  pro: Object.freeze({ rate: 20, burst: 50, concurrency: 8 }),
  "*": Object.freeze({ rate: 10, burst: 20, concurrency: 4 }),
});

/** API_KEY_PATTERN is SPEC.md section 4's key format. */
export const API_KEY_PATTERN = /^palm_live_[0-9a-f]{32}$/;

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;

/** CONFIG_SCHEMA is every environment variable {@link loadConfig} reads, in the docs' order. */
export const CONFIG_SCHEMA = {
  /** TCP port for every protocol; 0 picks a free port. */
  port: variable({ name: "PORT", parse: integer(8080, 0, 65535), default: "`8080`", meaning: "port for gRPC, gRPC-Web, Connect and REST" }),
  /** Interface to bind; undefined lets Node choose `::` or `0.0.0.0`. */
  host: variable({ name: "HOST", parse: text(undefined), default: "all interfaces", meaning: "interface to bind" }),
  /** A single Redis; undefined (and no redisClusterNodes) selects the in-memory store (one process only). */
  redisUrl: variable({
    name: "REDIS_URL",
    parse: (raw, name, problems) => {
      if (raw !== undefined && !/^rediss?:\/\//.test(raw)) {
        problems.push(`${name}: expected redis://host:port or rediss://…, got a value starting ${JSON.stringify(raw.slice(0, 8))}`);
      }
      return raw;
    },
    default: "unset → in-memory store",
    meaning: "`redis://` or `rediss://` URL of the key and quota store: a single Redis",
  }),
  /** Nodes of a Redis Cluster (any reachable ones); exclusive with redisUrl. */
  redisClusterNodes: variable({
    name: "REDIS_CLUSTER_NODES",
    parse: (raw, _name, problems) => parseRedisClusterNodes(raw, problems),
    default: "unset",
    meaning:
      "a Redis Cluster as the key and quota store instead: `host:port` of some of its nodes, comma-separated (`redis-1:6379,redis-2:6379`; IPv6 as `[::1]:6379`); the rest of the cluster is learnt from them. Setting it and `REDIS_URL` is a configuration error",
  }),
  /** Prefix of every Redis key, so several deployments or tests can share one Redis. */
  redisKeyPrefix: variable({ name: "PALM_REDIS_PREFIX", parse: text("palm:"), default: "`palm:`", meaning: "prefix of every Redis key" }),
  /** Redis command timeout, ms: a hung Redis answers 503 store_unavailable after this. */
  redisCommandTimeoutMs: variable({
    name: "PALM_REDIS_COMMAND_TIMEOUT_MS",
    parse: integer(1000, 50, 60_000),
    default: "`1000`",
    meaning: "a Redis command slower than this fails the request with 503",
  }),
  /** Lease of a pending quota unit, ms; renewed every third of it while the request runs. */
  quotaLeaseMs: variable({
    name: "PALM_QUOTA_LEASE_MS",
    parse: integer(30_000, 300, 3_600_000),
    default: "`30000`",
    meaning:
      "a request's pending quota unit is leased for this long and renewed while it runs; a replica that dies stops renewing, and Redis gives its units back once the lease has passed",
  }),
  /** Monthly limits per plan. */
  planLimits: variable({
    name: "PALM_PLAN_LIMITS",
    parse: (raw, _name, problems) => parsePlanLimits(raw, problems),
    default: '`{"free":100,"starter":1000,"pro":10000}`',
    meaning: "monthly limit per plan (JSON object)",
  }),
  /** Per-client limits per plan, over {@link DEFAULT_RATE_LIMITS} (palmctl's per-plan settings in the store win). */
  rateLimits: variable({
    name: "PALM_RATE_LIMITS",
    parse: (raw, _name, problems) => parseRateLimits(raw, problems),
    default:
      '`{"free":{"rate":1,"burst":10,"concurrency":2},"starter":{"rate":5,"burst":20,"concurrency":4},"pro":{"rate":20,"burst":50,"concurrency":8},"*":{"rate":10,"burst":20,"concurrency":4}}`',
    meaning:
      "per-client limits by plan (JSON object; `*` is every plan not named): `rate` requests per second with a `burst`, and `concurrency` requests in flight, across replicas; over either, 429 `rate_limited`. The plans given replace their defaults, the others keep them; `palmctl plans set-rate-limit` overrides a plan in the store",
  }),
  /** Development key for client "dev" on plan "pro" (in-memory store only); undefined → generated. */
  devKey: variable({
    name: "PALM_DEV_KEY",
    parse: (raw, name, problems) => {
      if (raw !== undefined && !API_KEY_PATTERN.test(raw))
        problems.push(`${name}: expected palm_live_ followed by 32 lowercase hex characters`);
      return raw;
    },
    default: "generated and printed",
    meaning: "in-memory store only: the development key (client `dev`, plan `pro`)",
  }),
  /** Deadline of one Analyze call, ms (a client's shorter grpc-timeout/connect-timeout wins). */
  analyzeTimeoutMs: variable({
    name: "PALM_ANALYZE_TIMEOUT_MS",
    parse: integer(30_000, 100, 600_000),
    default: "`30000`",
    meaning: "deadline of one analysis; a client's shorter `grpc-timeout` / `connect-timeout-ms` wins",
  }),
  /** Time a client has to send all request headers, ms. */
  headersTimeoutMs: variable({
    name: "PALM_HEADERS_TIMEOUT_MS",
    parse: integer(10_000, 100, 600_000),
    default: "`10000`",
    meaning: "time a client has to send its request headers",
  }),
  /** Time a REST client has to send the whole body, ms (slow-client guard). */
  bodyTimeoutMs: variable({
    name: "PALM_BODY_TIMEOUT_MS",
    parse: integer(30_000, 100, 600_000),
    default: "`30000`",
    meaning: "time a client has to send the whole body",
  }),
  /** Idle time after which a connection (HTTP/1.1 socket or HTTP/2 session) is closed, ms. */
  idleTimeoutMs: variable({
    name: "PALM_IDLE_TIMEOUT_MS",
    parse: integer(60_000, 1000, 3_600_000),
    default: "`60000`",
    meaning: "idle HTTP/2 sessions are closed after this",
  }),
  /** Bound on finishing in-flight requests after SIGTERM/SIGINT, ms. */
  shutdownGraceMs: variable({
    name: "PALM_SHUTDOWN_GRACE_MS",
    parse: integer(10_000, 0, 600_000),
    default: "`10000`",
    meaning: "on SIGTERM/SIGINT, how long in-flight requests may finish",
  }),
  /** Path of the ONNX model; undefined lets the engine use models/palm-lines/palm-lines.onnx. */
  modelPath: variable({
    name: "PALM_MODEL_PATH",
    parse: text(undefined),
    default: "`models/palm-lines/palm-lines.onnx`",
    meaning: "the ONNX model",
  }),
  /** Analysis worker processes; undefined → the engine's default. */
  workers: variable({
    name: "PALM_WORKERS",
    parse: integer(undefined, 1, 256),
    default: "one per CPU core, at most 4",
    meaning: "analysis worker processes",
  }),
  /** Analyses allowed to wait for a worker before 503 overloaded; undefined → the engine's default. */
  maxQueue: variable({
    name: "PALM_MAX_QUEUE",
    parse: integer(undefined, 0, 100_000),
    default: "2 × workers",
    meaning: "analyses waiting for a worker before 503 `overloaded`",
  }),
  /** REST codec worker threads; undefined → a quarter of the cores, 1 to 4; 0 → inline. */
  restCodecThreads: variable({
    name: "PALM_REST_CODEC_THREADS",
    parse: integer(undefined, 0, 64),
    default: "a quarter of the cores, 1 to 4",
    meaning:
      "worker threads that decode large REST bodies and encode responses, so that JSON and base64 never block the event loop (0: do it on the event loop)",
  }),
  /** Origins allowed to call the API from a browser (CORS); "*" allows any. */
  corsOrigins: variable({
    name: "PALM_CORS_ORIGINS",
    parse: (raw, _name, problems): readonly string[] => {
      const cors = parseCorsOrigins(raw);
      problems.push(...cors.problems);
      return Object.freeze(cors.origins);
    },
    default: "none",
    meaning:
      "origins allowed to call the API from a browser page of theirs, comma-separated (`https://app.example.com,http://localhost:5173`), or `*` for any; the demo page on the service's own origin needs none",
  }),
  /** Port of its own for `GET /metrics`; undefined serves it on `port`. */
  metricsPort: variable({
    name: "PALM_METRICS_PORT",
    parse: integer(undefined, 0, 65535),
    default: "unset: `GET /metrics` on `PORT`",
    meaning:
      "a port of its own for `GET /metrics` (same `HOST`), so that scrapes can be kept off the public port; `/metrics` on `PORT` then answers 404",
  }),
  /** pino log level. */
  logLevel: variable<string>({
    name: "LOG_LEVEL",
    parse: oneOf(LOG_LEVELS, "info"),
    default: "`info`",
    meaning: "`fatal`, `error`, `warn`, `info`, `debug`, `trace`, `silent`",
  }),
};

type Schema = typeof CONFIG_SCHEMA;

/** Config is the validated, frozen service configuration: one field per {@link CONFIG_SCHEMA} entry. */
export type Config = { readonly [K in keyof Schema]: Schema[K] extends Variable<infer T> ? T : never };

/** CONFIG_VARIABLES lists the schema's variables in the docs' order. */
export const CONFIG_VARIABLES: readonly Variable<unknown>[] = Object.freeze(Object.values(CONFIG_SCHEMA));

/**
 * RETIRED_VARIABLES were read once and are refused now, with what replaced them: a deployment
 * that still sets one would otherwise silently get something else than it asked for.
 */
export const RETIRED_VARIABLES: Readonly<Record<string, string>> = Object.freeze({
  PALM_THREAD_NICE: "the OS tuning was removed: threads keep the priority they start with (docs/decisions/os-tuning.md)",
  PALM_WORKER_SCHED: "the OS tuning was removed: workers run under the normal policy (docs/decisions/os-tuning.md)",
  PALM_OS_TUNING: "the OS tuning was removed (docs/decisions/os-tuning.md): nothing to turn on or off",
});

/**
 * RETIRED_DEFAULTS are the retired variables' values that ask for what now always happens: a
 * deployment that spelled out the old default keeps starting (config.spec, "accepts
 * PALM_OS_TUNING=off").
 */
const RETIRED_DEFAULTS: Readonly<Record<string, string>> = Object.freeze({ PALM_OS_TUNING: "off" });

/** crossChecks are the rules between variables, after each was read on its own. */
function crossChecks(config: Config, problems: string[]): void {
  if (config.redisUrl !== undefined && config.redisClusterNodes !== undefined) {
    problems.push(
      "REDIS_URL and REDIS_CLUSTER_NODES are both set: REDIS_URL names a single Redis, REDIS_CLUSTER_NODES a Redis Cluster; set one",
    );
  }
  if (config.redisClusterNodes !== undefined && /[{}]/.test(config.redisKeyPrefix)) {
    // A brace in the prefix would change the hash tag that keeps a client's keys in one slot.
    problems.push(`PALM_REDIS_PREFIX: must not contain { or } with REDIS_CLUSTER_NODES, got ${JSON.stringify(config.redisKeyPrefix)}`);
  }
}

/** ConfigError lists every invalid variable, one line each. */
export class ConfigError extends Error {
  override name = "ConfigError";
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
  }
}

/**
 * loadConfig validates `env` (default `process.env`) against {@link CONFIG_SCHEMA} and returns a
 * frozen {@link Config}. Throws {@link ConfigError} naming every bad variable at once. A value
 * is trimmed; blank counts as unset.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>> = process.env): Config {
  const problems: string[] = [];
  const get = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === "" ? undefined : v.trim();
  };
  const config: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(CONFIG_SCHEMA) as [string, Variable<unknown>][])
    config[key] = v.parse(get(v.name), v.name, problems);
  for (const [name, replacement] of Object.entries(RETIRED_VARIABLES)) {
    const value = get(name);
    if (value !== undefined && value !== RETIRED_DEFAULTS[name]) problems.push(`${name}: no longer read; ${replacement}`);
  }
  crossChecks(config as Config, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  return Object.freeze(config) as Config;
}

/**
 * unknownVariables lists `PALM_*` variables that {@link loadConfig} does not read: most likely
 * typos (PALM_PLAN_LIMIT), which main.ts reports as warnings at start-up.
 */
export function unknownVariables(env: Readonly<Record<string, string | undefined>> = process.env): string[] {
  const known = new Set([...CONFIG_VARIABLES.map((v) => v.name), ...Object.keys(RETIRED_VARIABLES)]);
  return Object.keys(env).filter((name) => name.startsWith("PALM_") && !known.has(name));
}

/** renderConfigTable is the configuration table of docs/operations.md, made from the schema. */
export function renderConfigTable(): string {
  const rows = CONFIG_VARIABLES.map((v) => `| \`${v.name}\` | ${v.default} | ${v.meaning} |`);
  return ["| variable | default | meaning |", "|---|---|---|", ...rows].join("\n");
}

/** parseCorsOrigins reads PALM_CORS_ORIGINS: comma-separated origins or "*"; returns problems. */
export function parseCorsOrigins(raw: string | undefined): { origins: string[]; problems: string[] } {
  if (raw === undefined) return { origins: [], problems: [] };
  const origins: string[] = [];
  const problems: string[] = [];
  for (const part of raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")) {
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
      problems.push(
        `PALM_CORS_ORIGINS: ${JSON.stringify(part)} is not an origin like https://app.example.com (scheme, host, optional port; no path or trailing slash)`,
      );
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
  for (const part of raw
    .split(",")
    .map((s) => s.trim())
    .filter((s) => s !== "")) {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(part);
    if (!m || Number(m[3]) < 1 || Number(m[3]) > 65535) {
      problems.push(
        `REDIS_CLUSTER_NODES: expected host:port, comma-separated (e.g. redis-1:6379,redis-2:6379), got ${JSON.stringify(part)}`,
      );
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

/** rateLimitProblem says what is wrong with a {@link RateLimit} read from JSON, or undefined. */
export function rateLimitProblem(v: unknown): string | undefined {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return "expected an object {rate, burst, concurrency}";
  const { rate, burst, concurrency } = v as Record<string, unknown>;
  const extra = Object.keys(v).filter((k) => !["rate", "burst", "concurrency"].includes(k));
  if (extra.length > 0) return `unknown field ${JSON.stringify(extra[0])}`;
  if (typeof rate !== "number" || !(rate >= 0.001) || rate > 1_000_000)
    return "rate must be a number of requests per second from 0.001 to 1000000";
  if (typeof burst !== "number" || !Number.isSafeInteger(burst) || burst < 1) return "burst must be an integer of at least 1";
  if (typeof concurrency !== "number" || !Number.isSafeInteger(concurrency) || concurrency < 1)
    return "concurrency must be an integer of at least 1";
  return undefined;
}

function parseRateLimits(raw: string | undefined, problems: string[]): PlanRateLimits {
  if (raw === undefined) return DEFAULT_RATE_LIMITS;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    problems.push('PALM_RATE_LIMITS: not valid JSON; expected e.g. {"free":{"rate":1,"burst":10,"concurrency":2}}');
    return DEFAULT_RATE_LIMITS;
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    problems.push("PALM_RATE_LIMITS: expected a JSON object of plan name → {rate, burst, concurrency}");
    return DEFAULT_RATE_LIMITS;
  }
  const limits: Record<string, RateLimit> = { ...DEFAULT_RATE_LIMITS };
  for (const [name, limit] of Object.entries(parsed)) {
    const problem = rateLimitProblem(limit);
    if (name !== "*" && !/^[a-z0-9_-]{1,32}$/.test(name)) {
      problems.push(`PALM_RATE_LIMITS: plan name ${JSON.stringify(name)} must be 1-32 of a-z 0-9 _ -, or *`);
    } else if (problem !== undefined) {
      problems.push(`PALM_RATE_LIMITS: plan ${JSON.stringify(name)}: ${problem}`);
    } else {
      const { rate, burst, concurrency } = limit as RateLimit;
      limits[name] = Object.freeze({ rate, burst, concurrency });
    }
  }
  return Object.freeze(limits);
}
