import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.spec.ts"],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Tests start their own servers and redis-server processes; run files one at a time
    // so that the 2-core CI machine is not oversubscribed by model workers.
    fileParallelism: false,
    reporters: ["default"],
  },
});
