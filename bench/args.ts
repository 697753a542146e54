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

/**
 * checkArgs stops the script before it runs anything when the command line has a word it does
 * not know (a typo would otherwise run the whole default bench): `--help` or `-h` prints `usage`
 * and exits 0, an unknown option prints it to stderr and exits 2.
 */
export function checkArgs(usage: string, flags: readonly string[], valued: readonly string[]): void {
  if (argv.includes("--help") || argv.includes("-h")) {
    process.stdout.write(usage);
    process.exit(0);
  }
  for (let i = 0; i < argv.length; i++) {
    if (valued.includes(argv[i]) && i + 1 < argv.length) i++;
    else if (!flags.includes(argv[i])) {
      process.stderr.write(`bench: unknown option ${JSON.stringify(argv[i])}\n${usage}`);
      process.exit(2);
    }
  }
}
