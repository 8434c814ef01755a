/** Builds dist/ once per test run: the e2e suites spawn real `node dist/server.js` processes. */
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";

export default function setup(): void {
  if (process.env.E2E_TARGET === "etcd" || process.env.SKIP_BUILD === "1") return;
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: resolve(import.meta.dirname, ".."), stdio: "inherit" });
}
