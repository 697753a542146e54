/**
 * palmctl: the operator CLI for API keys and usage, against the Redis of REDIS_URL or the Redis
 * Cluster of REDIS_CLUSTER_NODES (the same store and plan limits the servers use). Run as
 * `npx palmctl …` (bin/palmctl.mjs).
 *
 *   palmctl keys create --client ID [--plan NAME]   new key, printed alone on the last line
 *   palmctl keys revoke KEY|HASH|HASH-PREFIX        revoke one key
 *   palmctl keys list --client ID                   hash prefixes, created, revoked
 *   palmctl usage --client ID                       this month's used and limit
 *   palmctl clients set-plan --client ID --plan NAME
 *   palmctl plans set-rate-limit --plan NAME --rate N --burst N --concurrency N
 *   palmctl plans rate-limit --plan NAME            the per-client limits a plan has now
 *
 * `--help` (or `-h`, or `palmctl help ...`) after any command prints its help. Client ids follow
 * {@link CLIENT_ID_PATTERN}. An unreachable Redis ends the command with exit code 1 within
 * {@link CONNECT_TIMEOUT_MS} (test/integration/palmctl.spec.ts).
 */
import { generateApiKey, hashApiKey, isWellFormedApiKey } from "../auth/api-key.js";
import { quotaPeriodOf } from "../auth/quota-period.js";
import { createRedisStore } from "../auth/redis-store.js";
import type { Store } from "../auth/store.js";
import { ConfigError, loadConfig, rateLimitProblem, type Config, type RateLimit } from "../config.js";

/** PalmctlIo is where palmctl reads its environment and writes its output (tests inject it). */
export interface PalmctlIo {
  env?: Readonly<Record<string, string | undefined>>;
  stdout?: (line: string) => void;
  stderr?: (line: string) => void;
  /** A store to use instead of connecting to REDIS_URL or REDIS_CLUSTER_NODES (tests). */
  store?: Store;
}

/**
 * CLIENT_ID_PATTERN is the alphabet of client ids: lower-case letters and digits, then also `.`,
 * `_` and `-`, 1 to 64 in all. No `:` (the separator of the Redis layout, so that no id can name
 * another id's keys) and no `{` `}` (Redis Cluster hash tags).
 */
export const CLIENT_ID_PATTERN = /^[a-z0-9][a-z0-9._-]{0,63}$/;

/** CONNECT_TIMEOUT_MS: palmctl gives up on an unreachable Redis or cluster after this (exit 1). */
const CONNECT_TIMEOUT_MS = 3000;

/** COMMANDS: each command's synopsis and what it does (its --help). */
const COMMANDS: Readonly<Record<string, readonly [string, string]>> = Object.freeze({
  "keys create": ["palmctl keys create --client ID [--plan NAME]", "create a key; it is printed alone on the last line, only now"],
  "keys revoke": ["palmctl keys revoke KEY|HASH|HASH-PREFIX", "revoke one key (a hash prefix must be unique, 8+ hex)"],
  "keys list": ["palmctl keys list --client ID", "a client's keys: hash prefix, created, revoked"],
  usage: ["palmctl usage --client ID", "this month's used and limit of a client"],
  "clients set-plan": ["palmctl clients set-plan --client ID --plan NAME", "create a client or move it to another plan"],
  "plans set-rate-limit": [
    "palmctl plans set-rate-limit --plan NAME --rate N --burst N --concurrency N",
    "set a plan's per-client limits for every replica (within 5 s): requests per second, burst, requests in flight",
  ],
  "plans rate-limit": [
    "palmctl plans rate-limit --plan NAME",
    "a plan's per-client limits now, and whether palmctl or the configuration set them",
  ],
});

const FOOTER = `client ids: 1-64 of a-z 0-9 . _ - (starting with a letter or digit)
environment: REDIS_URL or REDIS_CLUSTER_NODES (one required), PALM_REDIS_PREFIX, PALM_PLAN_LIMITS, PALM_RATE_LIMITS
exit codes: 0 ok, 1 failure (Redis unreachable within ${CONNECT_TIMEOUT_MS / 1000} s included), 2 usage error`;

/** PALMCTL_USAGE is the help text. */
export const PALMCTL_USAGE = `usage:
${Object.values(COMMANDS)
  .map(([synopsis]) => `  ${synopsis}`)
  .join("\n")}
${FOOTER}`;

/** helpFor is the help of the commands starting with `words` (all of them when none matches). */
function helpFor(words: readonly string[]): string {
  const prefix = words.join(" ");
  const matching = Object.entries(COMMANDS).filter(([name]) => prefix !== "" && (name === prefix || name.startsWith(`${prefix} `)));
  if (matching.length === 0) return PALMCTL_USAGE;
  return `usage:\n${matching.map(([, [synopsis, what]]) => `  ${synopsis}\n      ${what}`).join("\n")}\n${FOOTER}`;
}

class UsageError extends Error {}

/** runPalmctl runs one command and returns the process exit code (0 ok, 1 failure, 2 usage). */
export async function runPalmctl(argv: readonly string[], io: PalmctlIo = {}): Promise<number> {
  const out = io.stdout ?? ((l: string) => process.stdout.write(`${l}\n`));
  const err = io.stderr ?? ((l: string) => process.stderr.write(`${l}\n`));
  if (argv.includes("--help") || argv.includes("-h") || argv[0] === "help") {
    out(helpFor(argv.filter((a) => a !== "--help" && a !== "-h" && a !== "help")));
    return 0;
  }
  let config: Config;
  try {
    config = loadConfig(io.env ?? process.env);
  } catch (e) {
    err(`palmctl: ${e instanceof ConfigError ? e.message : String(e)}`);
    return 2;
  }
  const [group, command, ...rest] = argv;
  let store = io.store;
  try {
    const args = parseFlags(group === "usage" ? [command, ...rest].filter((a) => a !== undefined) : rest);
    // Connected only once the arguments are valid: a usage error never waits for Redis.
    const open = async (): Promise<Store> => {
      if (store) return store;
      if (config.redisUrl === undefined && config.redisClusterNodes === undefined) {
        throw new UsageError("REDIS_URL is not set, nor REDIS_CLUSTER_NODES: palmctl manages the shared Redis store");
      }
      const redis = createRedisStore({
        url: config.redisUrl,
        clusterNodes: config.redisClusterNodes,
        keyPrefix: config.redisKeyPrefix,
        commandTimeoutMs: CONNECT_TIMEOUT_MS,
      });
      store = redis;
      await redis.ready(CONNECT_TIMEOUT_MS);
      return redis;
    };
    await dispatch(group, command, args, open, config, out);
    return 0;
  } catch (e) {
    if (e instanceof UsageError) {
      err(`palmctl: ${e.message}`);
      err(PALMCTL_USAGE);
      return 2;
    }
    err(`palmctl: ${e instanceof Error ? e.message : String(e)}`);
    return 1;
  } finally {
    if (store && !io.store) await store.close();
  }
}

interface Flags {
  positional: string[];
  flags: Map<string, string>;
}

function parseFlags(args: readonly string[]): Flags {
  const positional: string[] = [];
  const flags = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a.startsWith("--")) {
      const [name, inline] = a.slice(2).split("=", 2);
      const value = inline ?? args[++i];
      if (value === undefined || value === "") throw new UsageError(`--${name} needs a value`);
      flags.set(name, value);
    } else {
      positional.push(a);
    }
  }
  return { positional, flags };
}

function need(f: Flags, name: string): string {
  const v = f.flags.get(name);
  if (v === undefined) throw new UsageError(`--${name} is required`);
  return v;
}

function clientId(f: Flags): string {
  const id = need(f, "client");
  if (!CLIENT_ID_PATTERN.test(id)) throw new UsageError("--client must be 1-64 of a-z 0-9 . _ - starting with a letter or digit");
  return id;
}

function planName(f: Flags, config: Config): string | undefined {
  const plan = f.flags.get("plan");
  if (plan !== undefined && config.planLimits[plan] === undefined) {
    throw new UsageError(`unknown plan ${JSON.stringify(plan)}; PALM_PLAN_LIMITS has ${Object.keys(config.planLimits).join(", ")}`);
  }
  return plan;
}

const iso = (ms: number) => new Date(ms).toISOString();

async function dispatch(
  group: string | undefined,
  command: string | undefined,
  f: Flags,
  open: () => Promise<Store>,
  config: Config,
  out: (l: string) => void,
): Promise<void> {
  switch (`${group} ${group === "usage" ? "" : command}`.trim()) {
    case "keys create": {
      const id = clientId(f);
      const plan = planName(f, config);
      const store = await open();
      const key = generateApiKey();
      const record = await store.createKey(id, hashApiKey(key), plan);
      const client = await store.getClient(id);
      out(`created key ${record.hash.slice(0, 12)}… for client ${id} (plan ${client?.plan ?? plan}); it is shown only now:`);
      out(key);
      return;
    }
    case "keys revoke": {
      const target = f.positional[0];
      if (!target) throw new UsageError("keys revoke needs a KEY, a HASH or a hash prefix (8+ hex)");
      if (!isWellFormedApiKey(target) && !/^[0-9a-f]{8,64}$/.test(target))
        throw new UsageError("not a key, a SHA-256 hash or a hash prefix");
      const store = await open();
      let hash: string;
      if (isWellFormedApiKey(target)) hash = hashApiKey(target);
      else if (/^[0-9a-f]{64}$/.test(target)) hash = target;
      else if (/^[0-9a-f]{8,63}$/.test(target)) {
        const found = await store.findKeyHashes(target);
        if (found.length !== 1) throw new Error(found.length === 0 ? "no key with that hash prefix" : "hash prefix is ambiguous");
        hash = found[0];
      } else throw new UsageError("not a key, a SHA-256 hash or a hash prefix");
      if (!(await store.revokeKey(hash))) throw new Error("no such key");
      out(`revoked key ${hash.slice(0, 12)}…`);
      return;
    }
    case "keys list": {
      const id = clientId(f);
      const store = await open();
      const keys = await store.listKeys(id);
      out(`hash          created                   revoked`);
      for (const k of keys) {
        out(`${k.hash.slice(0, 12)}  ${iso(k.createdAt)}  ${k.revokedAt === undefined ? "-" : iso(k.revokedAt)}`);
      }
      return;
    }
    case "usage": {
      const id = clientId(f);
      const store = await open();
      const client = await store.getClient(id);
      if (!client) throw new Error(`no client ${JSON.stringify(id)}`);
      const period = quotaPeriodOf();
      const used = await store.usage(id, period);
      const limit = config.planLimits[client.plan];
      out(`client ${id} plan ${client.plan} period ${period.id}: used ${used} of ${limit ?? "?"} (resets ${iso(period.resetsAt * 1000)})`);
      return;
    }
    case "clients set-plan": {
      const id = clientId(f);
      const plan = planName(f, config) ?? need(f, "plan");
      const store = await open();
      await store.setPlan(id, plan);
      out(`client ${id} is on plan ${plan}`);
      return;
    }
    case "plans set-rate-limit": {
      const plan = planName(f, config) ?? need(f, "plan");
      const limit = { rate: Number(need(f, "rate")), burst: Number(need(f, "burst")), concurrency: Number(need(f, "concurrency")) };
      const problem = rateLimitProblem(limit);
      if (problem !== undefined) throw new UsageError(problem);
      const store = await open();
      await store.setPlanRateLimit(plan, limit);
      out(`plan ${plan}: ${describeLimit(limit)} per client (every replica within 5 s)`);
      return;
    }
    case "plans rate-limit": {
      const plan = planName(f, config) ?? need(f, "plan");
      const store = await open();
      const stored = await store.getPlanRateLimit(plan);
      const limit = stored ?? config.rateLimits[plan] ?? config.rateLimits["*"];
      out(`plan ${plan}: ${describeLimit(limit)} per client (${stored ? "set by palmctl" : "from the configuration"})`);
      return;
    }
    default:
      throw new UsageError(group === undefined ? "no command" : `unknown command ${[group, command].filter(Boolean).join(" ")}`);
  }
}

/** describeLimit is a plan's per-client limits in words. */
function describeLimit(limit: RateLimit): string {
  return `${limit.rate} requests per second, ${limit.burst} at once, ${limit.concurrency} in flight`;
}
