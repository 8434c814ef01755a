import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // The e2e suites need the assembled server (dist/server.js); they join `npm test` when it lands.
    // Until then they run against real etcd with `npm run test:e2e:etcd`.
    exclude: process.env.E2E_TARGET === "etcd" ? ["node_modules/**"] : ["node_modules/**", "test/e2e/**"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    // Two cores: keep process-heavy suites from starving each other.
    maxWorkers: 2,
    minWorkers: 1,
  },
});
