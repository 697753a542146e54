import { type ParseArgsConfig, parseArgs } from "node:util";

/**
 * scriptArgs is parseArgs over the script's own arguments, for the measuring scripts: `--help` (or `-h`) prints
 * `usage` and asks for exit 0; an unknown or malformed flag prints its one-line reason and `usage` and asks for
 * exit 2, in place of parseArgs' stack trace. A number is the exit status to return (test/unit/cli/scripts.spec.ts).
 */
export function scriptArgs<T extends ParseArgsConfig>(usage: string, config: T): ReturnType<typeof parseArgs<T>> | number {
  const args = config.args ?? process.argv.slice(2);
  const end = args.indexOf("--");
  if ((end < 0 ? args : args.slice(0, end)).some((a) => a === "--help" || a === "-h")) {
    console.log(usage);
    return 0;
  }
  try {
    return parseArgs(config);
  } catch (err) {
    console.error(`${(err as Error).message}\n${usage}`);
    return 2;
  }
}

/** oneOf answers whether `value` is one of `allowed`, printing the script's complaint and `usage` when it is not. */
export function oneOf(flag: string, value: string, allowed: readonly string[], usage: string): boolean {
  if (allowed.includes(value)) return true;
  console.error(`${flag} is one of ${allowed.join(", ")}, not '${value}'\n${usage}`);
  return false;
}
