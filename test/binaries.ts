/**
 * The reference binaries the tests and benchmarks run: Debian's etcd (etcd-server) and etcdctl
 * (etcd-client), 3.4.23; and Go (golang-go) with Debian's bbolt source (golang-github-coreos-bbolt-dev,
 * bbolt 1.3, the line etcd 3.4 links), which test/bbolt builds its reference bbolt tool from.
 * Found as .ci/run finds them, on PATH; ETCD_BIN / ETCDCTL / GO_BIN override.
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
export const GO_BIN = binary(process.env.GO_BIN, "go");
/** GOPATH holding Debian's Go sources (go.etcd.io/bbolt and golang.org/x/sys). */
export const DEBIAN_GOPATH = "/usr/share/gocode";
const BBOLT_SOURCE = join(DEBIAN_GOPATH, "src/go.etcd.io/bbolt/db.go");

/** What a fresh machine lacks for `npm test`, as one message; undefined when nothing. */
export function missingBinaries(): string | undefined {
  // The binaries must run; bbolt's source (a plain file) need only be readable.
  const wanted: Array<[string, number]> = [
    [ETCD_BIN, constants.X_OK],
    [ETCDCTL_BIN, constants.X_OK],
    [GO_BIN, constants.X_OK],
    [BBOLT_SOURCE, constants.R_OK],
  ];
  const missing = wanted
    .filter(([p, mode]) => {
      try {
        accessSync(p, mode);
        return false;
      } catch {
        return true;
      }
    })
    .map(([p]) => p);
  return missing.length === 0 ? undefined : `npm test needs Debian's etcd and etcdctl 3.4, Go and bbolt's source (apt-get install etcd-server etcd-client golang-go golang-github-coreos-bbolt-dev); not found: ${missing.join(", ")} (ETCD_BIN / ETCDCTL / GO_BIN override)`;
}
