/**
 * `node dist/server.js snapshot status FILE [-w simple|table|json|fields]` and
 * `node dist/server.js snapshot restore FILE [--data-dir ...]`: etcdctl 3.4's two offline snapshot
 * commands, for a machine with etcetera and no etcdctl. `status` prints what etcdctl prints for the
 * same file; `restore` takes etcdctl's flags and makes a data dir etcetera starts on, in
 * etcetera's own layout (the member directory an import of etcd's data dir writes), with the new
 * membership the flags describe, as etcd's restore does: member and cluster ids derived from
 * --initial-cluster and --initial-cluster-token, the snapshot's old membership dropped, raft at
 * term 1 with one applied conf change per member.
 *
 * Both read both formats: etcd's (a snapshot file or a member's bbolt `db`) and etcetera's own
 * SQLite backend (a member's `member/snap/db`, or a snapshot of the SQLite days), the latter as the
 * etcd snapshot a running member would have streamed for the same state (src/server/sqlite_image.ts).
 */
import { existsSync, mkdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { EtcdBackendReader } from "./etcd_format/backend_reader.js";
import { isSqliteFile } from "./etcd_format/sqlite_snapshot.js";
import { writeMemberDir } from "./etcd_format/import/member_dir.js";
import { snapshotStatus, type SnapshotStatus } from "./etcd_format/snapshot_status.js";
import { parseInitialCluster, verifyInitialCluster, type InitialMember } from "./server/config.js";
import { parseUrlList } from "./server/flags.js";
import { sqliteImageToEtcdSnapshot, type SqliteImageSnapshot } from "./server/sqlite_image.js";
import { computeClusterId, computeMemberId, type Member } from "./server/member.js";
import { fsyncDir } from "./wal/segment.js";

/** etcdctl's exit codes (ctlv3/command/error.go). */
const EXIT_ERROR = 1;
const EXIT_BAD_FEATURE = 4;
const EXIT_BAD_ARGS = 128;

class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
  ) {
    super(message);
  }
}

interface Out {
  stdout: (t: string) => void;
  stderr: (t: string) => void;
}

/** Runs `snapshot <args>`; returns the exit code. */
export async function snapshotMain(args: readonly string[], out: Out): Promise<number> {
  try {
    const [sub, ...rest] = args;
    if (sub === "status") await status(rest, out);
    else if (sub === "restore") await restore(rest, out);
    else throw new CliError(sub === undefined ? "snapshot needs a subcommand: status or restore" : `unknown command "${sub}" for "snapshot"`, EXIT_BAD_ARGS);
    return 0;
  } catch (err) {
    out.stderr(`Error: ${(err as Error).message}\n`);
    return err instanceof CliError ? err.exitCode : EXIT_ERROR;
  }
}

/** cobra's parsing as etcdctl meets it: flags anywhere, `--f=v`, `--f v`, booleans alone; unknown flags refused by name. */
function parseArgs(args: readonly string[], strings: Record<string, string>, bools: readonly string[], short: Record<string, string> = {}): { flags: Map<string, string>; positional: string[] } {
  const flags = new Map<string, string>();
  const positional: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    if (arg === "--") {
      positional.push(...args.slice(i + 1));
      break;
    }
    if (!arg.startsWith("-") || arg === "-") {
      positional.push(arg);
      continue;
    }
    const long = arg.startsWith("--");
    const body = arg.slice(long ? 2 : 1);
    const eq = body.indexOf("=");
    let name = eq === -1 ? body : body.slice(0, eq);
    if (!long) {
      const full = short[name];
      if (full === undefined) throw new CliError(`unknown shorthand flag: '${name[0] ?? ""}' in ${arg}`, EXIT_ERROR);
      name = full;
    }
    if (bools.includes(name)) {
      const v = eq === -1 ? "true" : body.slice(eq + 1);
      if (v !== "true" && v !== "false") throw new CliError(`invalid argument "${v}" for "--${name}" flag: strconv.ParseBool: parsing "${v}": invalid syntax`, EXIT_ERROR);
      flags.set(name, v);
    } else if (name in strings) {
      if (eq !== -1) flags.set(name, body.slice(eq + 1));
      else if (i + 1 < args.length) flags.set(name, args[++i]!);
      else throw new CliError(`flag needs an argument: --${name}`, EXIT_ERROR);
    } else {
      throw new CliError(long ? `unknown flag: --${name}` : `unknown shorthand flag: '${name}' in ${arg}`, EXIT_ERROR);
    }
  }
  for (const [name, def] of Object.entries(strings)) if (!flags.has(name)) flags.set(name, def);
  for (const name of bools) if (!flags.has(name)) flags.set(name, "false");
  return { flags, positional };
}

// ---- status ----

async function status(args: readonly string[], out: Out): Promise<void> {
  const { flags, positional } = parseArgs(args, { "write-out": "simple" }, [], { w: "write-out" });
  if (positional.length !== 1) throw new CliError("snapshot status requires exactly one argument", EXIT_BAD_ARGS);
  const format = flags.get("write-out")!;
  if (!["simple", "table", "json", "fields", "protobuf"].includes(format)) throw new CliError(`unknown output format "${format}"`, EXIT_BAD_FEATURE);
  if (format === "protobuf") throw new CliError("unsupported output format", EXIT_BAD_FEATURE);
  const file = positional[0]!;
  const image = await sqliteImageOf(file, false);
  try {
    out.stdout(formatStatus(snapshotStatus(image?.path ?? file), format));
  } finally {
    image?.dispose();
  }
}

/**
 * For etcetera's SQLite backend, the etcd snapshot of it in a scratch directory; undefined for any
 * other file (read as etcd's format). A missing file is left to the reader, which names it.
 */
async function sqliteImageOf(file: string, requireHash: boolean, scratchParent?: string): Promise<SqliteImageSnapshot | undefined> {
  if (!existsSync(file) || !isSqliteFile(file)) return undefined;
  return sqliteImageToEtcdSnapshot(file, { requireHash, ...(scratchParent !== undefined ? { scratchParent } : {}) });
}

/** etcdctl's printers for snapshot.Status (ctlv3/command/printer*.go). */
export function formatStatus(s: SnapshotStatus, format: string): string {
  const row = [(s.hash >>> 0).toString(16), String(s.revision), String(s.totalKey), humanizeBytes(s.totalSize)];
  switch (format) {
    case "json":
      return `${JSON.stringify({ hash: s.hash >>> 0, revision: s.revision, totalKey: s.totalKey, totalSize: s.totalSize })}\n`;
    case "fields":
      return `"Hash" : ${s.hash >>> 0}\n"Revision" : ${s.revision}\n"Keys" : ${s.totalKey}\n"Size" : ${s.totalSize}\n`;
    case "table":
      return table(["HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE"], [row]);
    default:
      return `${row.join(", ")}\n`;
  }
}

/** go-humanize's Bytes: SI units, one decimal below 10. */
export function humanizeBytes(n: number): string {
  if (n < 10) return `${n} B`;
  const units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
  const e = Math.floor(Math.log(n) / Math.log(1000));
  // Tenths, rounded half up as humanize rounds; then Go's %.0f rounds a tie to even (20.5 kB is "20 kB").
  const tenths = Math.floor((n / 1000 ** e) * 10 + 0.5);
  if (tenths < 100) return `${(tenths / 10).toFixed(1)} ${units[e]}`;
  let whole = Math.floor(tenths / 10);
  const rest = tenths % 10;
  if (rest > 5 || (rest === 5 && whole % 2 === 1)) whole++;
  return `${whole} ${units[e]}`;
}

/** olekukonko/tablewriter as etcdctl sets it up: centred header, right-aligned cells. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = `+${widths.map((w) => "-".repeat(w + 2)).join("+")}+\n`;
  const centre = (s: string, w: number) => {
    const left = Math.floor((w - s.length) / 2);
    return " ".repeat(left) + s + " ".repeat(w - s.length - left);
  };
  const head = `|${header.map((h, i) => ` ${centre(h, widths[i]!)} `).join("|")}|\n`;
  const body = rows.map((r) => `|${r.map((c, i) => ` ${c.padStart(widths[i]!)} `).join("|")}|\n`).join("");
  return line + head + line + body + line;
}

// ---- restore ----

const RESTORE_FLAGS = {
  "data-dir": "",
  name: "default",
  "initial-cluster": "default=http://localhost:2380",
  "initial-cluster-token": "etcd-cluster",
  "initial-advertise-peer-urls": "http://localhost:2380",
};

async function restore(args: readonly string[], out: Out): Promise<void> {
  const { flags, positional } = parseArgs(args, RESTORE_FLAGS, ["skip-hash-check"]);
  if (positional.length !== 1) throw new CliError("snapshot restore requires exactly one argument", EXIT_BAD_ARGS);
  const file = positional[0]!;
  const name = flags.get("name")!;
  const token = flags.get("initial-cluster-token")!;
  let initial: InitialMember[];
  try {
    initial = parseInitialCluster(flags.get("initial-cluster")!);
    verifyInitialCluster(name, initial, parseUrlList(flags.get("initial-advertise-peer-urls")!));
  } catch (err) {
    throw new CliError((err as Error).message, EXIT_ERROR);
  }
  const members: Member[] = initial.map((m) => ({ id: computeMemberId(m.peerUrls, token), name: m.name, peerUrls: m.peerUrls, clientUrls: [], isLearner: false }));
  const local = members.find((m) => m.name === name)!;
  const clusterId = computeClusterId(members.map((m) => m.id));
  const dataDir = flags.get("data-dir") === "" ? `${name}.etcd` : flags.get("data-dir")!;
  if (existsSync(dataDir)) throw new CliError(`data-dir "${dataDir}" exists`, EXIT_ERROR);

  const log = (msg: string, fields: Record<string, unknown>) => out.stderr(`${JSON.stringify({ level: "info", ts: Date.now() / 1000, msg, ...fields })}\n`);
  log("restoring snapshot", { path: file, "data-dir": dataDir });
  // etcd's restore checks the SHA-256 trailer unless told not to (a db copied from a data dir has none).
  const requireHash = flags.get("skip-hash-check") !== "true";
  // etcetera's SQLite backend is converted beside the data dir to be (its disk, not /tmp's, has room for it).
  mkdirSync(dirname(resolve(dataDir)), { recursive: true });
  const image = await sqliteImageOf(file, requireHash, dirname(resolve(dataDir)));
  let source: EtcdBackendReader;
  try {
    source = EtcdBackendReader.open(image?.path ?? file, { requireSnapshotHash: image === undefined && requireHash });
  } catch (err) {
    image?.dispose();
    throw err;
  }
  // Written beside the data dir and renamed into place: a failed restore leaves no data dir behind.
  const staging = join(dirname(resolve(dataDir)), `.${name}.etcetera-restore-${process.pid}`);
  rmSync(staging, { recursive: true, force: true });
  try {
    // etcd's restore: one conf change per member at term 1 (indexes 1..n), applied and snapshotted.
    const index = members.length;
    await writeMemberDir({
      source,
      dir: join(staging, "member"),
      memberId: local.id,
      clusterId,
      members,
      removedMemberIds: [],
      consistentIndex: index,
      term: 1,
      hardState: { term: 1, vote: 0n, commit: index },
      tail: [],
    });
    renameSync(staging, dataDir);
    await fsyncDir(dirname(resolve(dataDir)));
  } catch (err) {
    rmSync(staging, { recursive: true, force: true });
    throw err;
  } finally {
    source.close();
    image?.dispose();
  }
  log("restored snapshot", { path: file, "data-dir": dataDir });
}
