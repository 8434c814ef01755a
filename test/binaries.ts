/**
 * The reference binaries the tests and benchmarks run: Debian's etcd (etcd-server) and etcdctl
 * (etcd-client), 3.4.23. Found as .ci/run finds them, on PATH; ETCD_BIN / ETCDCTL override.
 */
import { accessSync, constants } from "node:fs";
import { delimiter, join } from "node:path";

function onPath(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    if (dir === "") continue;
    const p = join(dir, name);
    try {
      accessSync(p, constants.X_OK);
      return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** `env` if set, else `name` on PATH, else /usr/bin/<name> (so a missing binary names where it looked). */
function binary(env: string | undefined, name: string): string {
  return env !== undefined && env !== "" ? env : (onPath(name) ?? `/usr/bin/${name}`);
}

export const ETCD_BIN = binary(process.env.ETCD_BIN, "etcd");
export const ETCDCTL_BIN = binary(process.env.ETCDCTL, "etcdctl");

/** What a fresh machine lacks for `npm test`, as one message; undefined when nothing. */
export function missingBinaries(): string | undefined {
  const missing = [ETCD_BIN, ETCDCTL_BIN].filter((p) => {
    try {
      accessSync(p, constants.X_OK);
      return false;
    } catch {
      return true;
    }
  });
  return missing.length === 0 ? undefined : `npm test needs Debian's etcd and etcdctl 3.4 (apt-get install etcd-server etcd-client); not found: ${missing.join(", ")} (ETCD_BIN / ETCDCTL override)`;
}
