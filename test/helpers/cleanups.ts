import { afterEach } from "vitest";

/** What a test opened (a server, a store, a client) and closes after it. */
export type Cleanup = () => Promise<void> | void;

/**
 * Registers, for the calling file, an afterEach that runs the cleanups its tests deferred, newest
 * first (a server closes before the store it uses), and returns the function that defers one.
 */
export function cleanupAfterEach(): (cleanup: Cleanup) => void {
  const cleanups: Cleanup[] = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  return (cleanup) => {
    cleanups.push(cleanup);
  };
}
