/**
 * Structured JSON logs (pino). One line per request with request id, protocol, method, status,
 * latency and client id; never a key (see {@link redactKey}), an image, or a client-visible stack.
 */
import { pino, type Logger } from "pino";

export type { Logger } from "pino";

/** LoggerOptions configure {@link createLogger}. */
export interface LoggerOptions {
  /** pino level. Default "info". */
  level?: string;
  /** Destination stream. Default stdout. */
  destination?: NodeJS.WritableStream;
}

/** createLogger returns the service's pino logger. */
export function createLogger(options: LoggerOptions = {}): Logger {
  const opts = {
    level: options.level ?? "info",
    base: { service: "palm-api" },
    // Belt and braces: these paths never carry anything worth logging.
    redact: { paths: ["apiKey", "key", "image", "headers['x-api-key']"], censor: "[redacted]" },
  };
  return options.destination ? pino(opts, options.destination as pino.DestinationStream) : pino(opts);
}

/** redactKey shows a key as `palm_live_…` plus its last 4 characters (SPEC.md section 4). */
export function redactKey(key: string): string {
  return `palm_live_…${key.slice(-4)}`;
}
