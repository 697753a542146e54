/**
 * Starting worker threads whose entry may be a TypeScript file. Under `node --import tsx` and
 * under vitest the entry is `.ts`, and Node 20 does not pass `--import` hooks to workers, so a
 * tiny bootstrap registers tsx inside the worker first; compiled `.js` entries start directly.
 */
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import { Worker } from "node:worker_threads";

/** siblingModuleUrl is `./<name>.ts` or `./<name>.js` next to `selfUrl`, whichever `selfUrl` is. */
export function siblingModuleUrl(selfUrl: string, name: string): URL {
  const ext = selfUrl.endsWith(".ts") ? ".ts" : ".js";
  return new URL(`./${name}${ext}`, selfUrl);
}

/** packageUrl resolves a package specifier (e.g. "tsx/esm/api") to a file URL, under vitest too. */
export function packageUrl(specifier: string): string {
  try {
    return import.meta.resolve(specifier);
  } catch {
    return pathToFileURL(createRequire(import.meta.url).resolve(specifier)).href;
  }
}

/** spawnWorker starts a worker thread on `url`, registering tsx inside it when the entry is TypeScript. */
export function spawnWorker(url: URL, workerData: unknown): Worker {
  if (url.pathname.endsWith(".js")) return new Worker(url, { workerData });
  const api = packageUrl("tsx/esm/api");
  const boot = `import { register } from ${JSON.stringify(api)}; register(); await import(${JSON.stringify(url.href)});`;
  return new Worker(new URL(`data:text/javascript,${encodeURIComponent(boot)}`), { workerData });
}
