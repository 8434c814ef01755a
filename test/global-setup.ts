/** Builds dist/ once per test run: the e2e suites spawn real `node dist/server.js` processes. */
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";
import { missingBinaries } from "./binaries.js";

export default function setup(): void {
  // The e2e, fuzz and grpc suites run Debian's etcd and etcdctl: say so once, up front.
  const missing = missingBinaries();
  if (missing !== undefined) process.stderr.write(`\n*** ${missing}\n\n`);
  if (process.env.E2E_TARGET === "etcd" || process.env.SKIP_BUILD === "1") return;
  execFileSync("npx", ["tsc", "-p", "tsconfig.build.json"], { cwd: resolve(import.meta.dirname, ".."), stdio: "inherit" });
}
