/** Command-line options of the bench scripts: `--name value` pairs and `--flag`s. */
/** The words after the script's name. */
export const argv: readonly string[] = process.argv.slice(2);

/** argValue is the word after `name` on the command line, or undefined. */
export function argValue(name: string): string | undefined {
  const i = argv.indexOf(name);
  return i >= 0 ? argv[i + 1] : undefined;
}

/** hasFlag tells whether `name` is on the command line. */
export function hasFlag(name: string): boolean {
  return argv.includes(name);
}

/** envArg parses `name K=V[,K=V]` into an environment ({} when absent). */
export function envArg(name: string): Record<string, string> {
  return Object.fromEntries(
    (argValue(name) ?? "")
      .split(",")
      .filter(Boolean)
      .map((kv) => kv.split("=", 2) as [string, string]),
  );
}
