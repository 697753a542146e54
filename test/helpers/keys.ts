/**
 * Registering keys in a real store for tests.
 */
import { generateApiKey, hashApiKey } from "../../src/auth/api-key.js";
import type { Store } from "../../src/auth/store.js";

/** registerKey creates a fresh key for `clientId` on `plan` and returns the plaintext key. */
export async function registerKey(store: Store, clientId: string, plan = "free"): Promise<string> {
  const key = generateApiKey();
  await store.createKey(clientId, hashApiKey(key), plan);
  return key;
}
