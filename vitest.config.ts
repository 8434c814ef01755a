import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["node_modules/**"],
    // The e2e suites spawn dist/server.js: build it once before any test file runs.
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two cores: keep process-heavy suites from starving each other.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
