/**
 * etcetera's own `snapshot status` and `snapshot restore` (src/snapshot_cli.ts, `node
 * dist/server.js snapshot ...`), held against etcdctl 3.4's: for a snapshot saved from real etcd
 * and one saved from the target, `snapshot status` prints exactly what etcdctl prints in every
 * output format; `snapshot restore` with etcdctl's flags makes a data dir the target starts on,
 * serving the snapshot's keys with their revisions, the lease, and the membership the flags name.
 *
 * With E2E_TARGET=etcd the target is etcd and the restore is etcdctl's (the reference run of the
 * same checks); the status comparison runs our command in-process, which needs no build.
 */
import Database from "better-sqlite3";
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { snapshotMain } from "../../src/snapshot_cli.js";
import { reservePort } from "../ports.js";
import { clients, unary } from "./grpc_client.js";
import { Cluster, etcdctl, Member, SERVER_JS, TARGET_ETCD, type CtlResult, type Target } from "./harness.js";

const OURS: Target = TARGET_ETCD ? "etcd" : "etcetera";
const LEASE_ID = 0x2345678;
const TOKEN = "snapshot-cli-token";
const FORMATS = ["simple", "table", "json", "fields"];

const dir = mkdtempSync(join(tmpdir(), "etcetera-snapshot-cli-"));
const cleanup: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
  rmSync(dir, { recursive: true, force: true });
});

async function ok(endpoint: string, args: string[]): Promise<string> {
  const r = await etcdctl(endpoint, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

/** Our command in-process: exit code and what it printed. */
async function ours(args: string[]): Promise<CtlResult> {
  let stdout = "";
  let stderr = "";
  const code = await snapshotMain(args, { stdout: (t) => void (stdout += t), stderr: (t) => void (stderr += t) });
  return { code, stdout, stderr };
}

/** Our command as users run it: `node dist/server.js snapshot ...`. */
function oursProcess(args: string[]): Promise<CtlResult> {
  return new Promise((res) => {
    execFile(process.execPath, [SERVER_JS, "snapshot", ...args], { timeout: 60_000 }, (err, stdout, stderr) => {
      res({ code: err === null ? 0 : typeof err.code === "number" ? err.code : 1, stdout: stdout.toString(), stderr: stderr.toString() });
    });
  });
}

interface Saved {
  /** The snapshot `etcdctl snapshot save` wrote. */
  file: string;
  /** The member's own backend after it stopped cleanly: etcd's bbolt db, or etcetera's SQLite one. */
  db: string;
  kvs: string;
  revision: number;
}

/**
 * Writes a history (overwrites, a delete, a txn, a lease with a key), saves a snapshot of it, and
 * stops the member cleanly (its data dir stays until the suite ends).
 */
async function snapshotOf(target: Target, name: string): Promise<Saved> {
  const c = await Cluster.create({ size: 1, target });
  cleanup.push(() => c.destroy());
  await c.start();
  const ep = c.members[0]!.endpoint;
  for (let i = 0; i < 12; i++) await ok(ep, ["put", `k${i % 5}`, `v${i}`]);
  await ok(ep, ["del", "k2"]);
  const g = clients(ep);
  try {
    await unary(g.lease, "LeaseGrant", { TTL: 900, ID: LEASE_ID });
    await unary(g.kv, "Txn", { success: [{ request_put: { key: Buffer.from("t1"), value: Buffer.from("a") } }, { request_put: { key: Buffer.from("leased"), value: Buffer.from("l"), lease: LEASE_ID } }] });
  } finally {
    g.close();
  }
  const all = JSON.parse(await ok(ep, ["get", "", "--prefix", "-w", "json"])) as { header: { revision: number }; kvs: unknown[] };
  expect(all.kvs.length).toBe(6);
  const file = join(dir, `${name}.db`);
  await ok(ep, ["snapshot", "save", file]);
  await c.stop("SIGTERM");
  return { file, db: join(c.members[0]!.spec.dataDir, "member", "snap", "db"), kvs: JSON.stringify(all.kvs), revision: all.header.revision };
}

let etcdSnap: Saved;
let oursSnap: Saved;

beforeAll(async () => {
  etcdSnap = await snapshotOf("etcd", "from-etcd");
  oursSnap = await snapshotOf(OURS, "from-target");
}, 120_000);

describe("snapshot status prints what etcdctl snapshot status prints", () => {
  for (const which of ["real etcd", "the target"]) {
    it(`for a snapshot from ${which}, in every output format`, async () => {
      const file = which === "real etcd" ? etcdSnap.file : oursSnap.file;
      for (const format of FORMATS) {
        const want = await etcdctl("127.0.0.1:1", ["snapshot", "status", file, "-w", format]);
        expect(want.code, want.stderr).toBe(0);
        const got = await ours(["status", file, "-w", format]);
        expect({ format, code: got.code, stdout: got.stdout }).toEqual({ format, code: 0, stdout: want.stdout });
      }
      // The revision etcdctl reports is the one the source served when the snapshot was taken.
      const json = JSON.parse((await ours(["status", file, "--write-out=json"])).stdout) as { revision: number; totalKey: number };
      expect(json.revision).toBe(which === "real etcd" ? etcdSnap.revision : oursSnap.revision);
      if (!TARGET_ETCD) {
        // And through the entry point, as a user runs it.
        const p = await oursProcess(["status", file, "-w", "table"]);
        const want = await etcdctl("127.0.0.1:1", ["snapshot", "status", file, "-w", "table"]);
        expect({ code: p.code, stdout: p.stdout, stderr: p.stderr }).toEqual({ code: 0, stdout: want.stdout, stderr: "" });
      }
    });
  }

  it("refuses an unknown flag by name, and a missing file as etcdctl does", async () => {
    const bad = await ours(["restore", etcdSnap.file, "--bogus-flag=1", `--data-dir=${join(dir, "never")}`]);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toContain("unknown flag: --bogus-flag");
    const badStatus = await ours(["status", etcdSnap.file, "--wal-dir=x"]);
    expect(badStatus.stderr).toContain("unknown flag: --wal-dir");
    const none = await ours(["status", join(dir, "missing.db")]);
    expect(none.code).not.toBe(0);
    const ctl = await etcdctl("127.0.0.1:1", ["snapshot", "status", join(dir, "missing.db")]);
    expect(ctl.code).not.toBe(0);
    expect(none.stderr).toContain("missing.db");
  });

  it("refuses a SQLite file that is not an etcetera backend, naming the file and what is missing", async () => {
    const image = join(dir, "not-a-backend.db");
    const db = new Database(image);
    db.exec("CREATE TABLE kv (rev INTEGER PRIMARY KEY, key BLOB, value BLOB)");
    db.prepare("INSERT INTO kv VALUES (?, ?, ?)").run(2, Buffer.from("k"), Buffer.from("v"));
    db.close();
    for (const run of [ours, oursProcess]) {
      if (TARGET_ETCD && run === oursProcess) continue;
      const st = await run(["status", image]);
      expect(st.code).not.toBe(0);
      expect(st.stderr).toContain(`${image}: byte offset 0: a SQLite database but not an etcetera backend: table "kv" has no column "create_rev"`);
      const target = join(dir, `never-${run === ours ? "in" : "proc"}`);
      const rs = await run(["restore", image, "--skip-hash-check", `--data-dir=${target}`]);
      expect(rs.code).not.toBe(0);
      expect(rs.stderr).toContain(`${image}: byte offset 0: a SQLite database but not an etcetera backend`);
      expect(existsSync(target)).toBe(false);
    }
    // etcdctl refuses it too, in its own words.
    const ctl = await etcdctl("127.0.0.1:1", ["snapshot", "status", image]);
    expect(ctl.code).not.toBe(0);
  });
});

/** The target's restore of `file` (etcdctl's for etcd, the reference run; ours for etcetera). */
function restoreWith(file: string, flags: string[]): Promise<CtlResult> {
  return TARGET_ETCD ? etcdctl("127.0.0.1:1", ["snapshot", "restore", file, ...flags]) : ours(["restore", file, ...flags]);
}

/** Restores `file` into a new data dir, starts the target on it, and checks it serves `snap`'s data. */
async function restoreAndServe(file: string, snap: Saved, label: string, extra: string[] = []): Promise<void> {
  const [clientPort, peerPort] = [await reservePort(), await reservePort()];
  const dataDir = join(dir, `restored-${label}.etcd`);
  const peer = `http://127.0.0.1:${peerPort}`;
  const flags = [`--data-dir=${dataDir}`, "--name=r1", `--initial-cluster=r1=${peer}`, `--initial-cluster-token=${TOKEN}`, `--initial-advertise-peer-urls=${peer}`, ...extra];
  // etcd's layout made by etcdctl for etcd (the reference run), etcetera's made by ours.
  const r = await restoreWith(file, flags);
  expect(r.code, r.stderr).toBe(0);
  // Restoring again over the same data dir is refused, as etcdctl refuses it.
  const again = await restoreWith(file, flags);
  expect(again.code).not.toBe(0);
  expect(again.stderr).toContain(`data-dir "${dataDir}" exists`);

  const m = new Member({ name: "r1", clientPort, peerPort, dataDir }, [
    "--name=r1",
    `--data-dir=${dataDir}`,
    `--listen-client-urls=http://127.0.0.1:${clientPort}`,
    `--advertise-client-urls=http://127.0.0.1:${clientPort}`,
    `--listen-peer-urls=${peer}`,
    `--initial-advertise-peer-urls=${peer}`,
    `--initial-cluster=r1=${peer}`,
    `--initial-cluster-token=${TOKEN}`,
    "--log-level=info",
  ], {}, OURS);
  cleanup.push(() => m.kill("SIGKILL"));
  m.start();
  await m.waitReady(60_000);
  const all = JSON.parse(await ok(m.endpoint, ["get", "", "--prefix", "-w", "json"])) as { header: { revision: number }; kvs: unknown[] };
  expect(JSON.stringify(all.kvs)).toBe(snap.kvs);
  expect(all.header.revision).toBe(snap.revision);
  const ttl = JSON.parse(await ok(m.endpoint, ["lease", "timetolive", LEASE_ID.toString(16), "--keys", "-w", "json"])) as { "granted-ttl": number; keys?: string[] };
  expect(ttl["granted-ttl"]).toBe(900);
  expect((ttl.keys ?? []).map((k) => Buffer.from(k, "base64").toString())).toEqual(["leased"]);
  // The membership is the flags' (the snapshot's own members are dropped): one member named r1.
  const members = await ok(m.endpoint, ["member", "list"]);
  expect(members.trim().split("\n").length).toBe(1);
  expect(members).toContain(`r1, ${peer}`);
  await ok(m.endpoint, ["put", "after", "x"]);
  const after = JSON.parse(await ok(m.endpoint, ["get", "after", "-w", "json"])) as { kvs: Array<{ mod_revision: number }> };
  expect(after.kvs[0]!.mod_revision).toBe(snap.revision + 1);
  await m.kill("SIGKILL");
}

describe("snapshot restore makes a data dir the target serves the snapshot's data from", () => {
  for (const which of ["real etcd", "the target"]) {
    it(`from a snapshot of ${which}`, async () => {
      const snap = which === "real etcd" ? etcdSnap : oursSnap;
      await restoreAndServe(snap.file, snap, which.replace(/ /g, "-"));
    }, 120_000);
  }
});

/** `db` with the SHA-256 of its bytes appended: a snapshot file (and etcetera's own snapshot format of the SQLite days). */
function withHashTrailer(db: string, name: string): string {
  const bytes = readFileSync(db);
  const file = join(dir, name);
  writeFileSync(file, Buffer.concat([bytes, createHash("sha256").update(bytes).digest()]));
  return file;
}

/**
 * Both commands also read the target's own backend: etcd's bbolt db, or etcetera's SQLite
 * member/snap/db (and a snapshot of the SQLite days, that file followed by its SHA-256). For etcd the
 * reference is etcdctl on the same file; for etcetera, whose db etcdctl cannot read, it is etcdctl
 * on the snapshot saved from the member just before it stopped.
 */
describe("snapshot status and restore read a stopped member's own backend, in the target's format", () => {
  it("status prints what etcdctl prints for that state, in every output format, with and without a SHA-256 trailer", async () => {
    const trailed = withHashTrailer(oursSnap.db, "own-db-with-hash.db");
    for (const format of FORMATS) {
      const want = await etcdctl("127.0.0.1:1", ["snapshot", "status", TARGET_ETCD ? oursSnap.db : oursSnap.file, "-w", format]);
      expect(want.code, want.stderr).toBe(0);
      for (const file of [oursSnap.db, trailed]) {
        const got = await ours(["status", file, "-w", format]);
        expect({ format, file, code: got.code, stdout: got.stdout, stderr: got.stderr }).toEqual({ format, file, code: 0, stdout: want.stdout, stderr: "" });
      }
    }
    const json = JSON.parse((await ours(["status", oursSnap.db, "-w", "json"])).stdout) as { revision: number; totalKey: number };
    expect(json.revision).toBe(oursSnap.revision);
    if (!TARGET_ETCD) {
      const p = await oursProcess(["status", oursSnap.db, "-w", "table"]);
      const want = await etcdctl("127.0.0.1:1", ["snapshot", "status", oursSnap.file, "-w", "table"]);
      expect({ code: p.code, stdout: p.stdout, stderr: p.stderr }).toEqual({ code: 0, stdout: want.stdout, stderr: "" });
    }
  });

  it("restore refuses the db without --skip-hash-check (it has no SHA-256), and a trailer that does not match", async () => {
    const target = join(dir, "never-unhashed");
    const r = await restoreWith(oursSnap.db, [`--data-dir=${target}`]);
    expect(r.code).not.toBe(0);
    // etcdctl 3.4 leaves the data dir it had begun behind a failed restore; ours writes beside it
    // and renames, so a refused restore leaves nothing.
    expect(existsSync(target)).toBe(TARGET_ETCD);
    rmSync(target, { recursive: true, force: true });
    const bad = withHashTrailer(oursSnap.db, "own-db-bad-hash.db");
    const bytes = readFileSync(bad);
    bytes[bytes.length - 1]! ^= 0xff;
    writeFileSync(bad, bytes);
    const rb = await restoreWith(bad, [`--data-dir=${target}`]);
    expect(rb.code).not.toBe(0);
    expect(existsSync(target)).toBe(TARGET_ETCD);
    if (!TARGET_ETCD) {
      expect(r.stderr).toContain(`${oursSnap.db}: byte offset ${statSync(oursSnap.db).size}: no SHA-256 trailer`);
      expect(rb.stderr).toContain(`${bad}: byte offset ${bytes.length - 32}: SHA-256 trailer`);
    }
  });

  it("status and restore refuse a truncated db with the file's name, never a partial restore", async () => {
    // Cut inside the third page: the file keeps its header (SQLite) or its two meta pages (bbolt),
    // and loses pages both need. (A cut at half the file can keep every page in use of etcd's db,
    // whose file has free pages at its end: that file is whole, and both tools read it.)
    const half = join(dir, "own-db-truncated.db");
    writeFileSync(half, readFileSync(oursSnap.db).subarray(0, 2 * 4096 + 100));
    const st = await ours(["status", half]);
    expect(st.code, st.stdout).not.toBe(0);
    expect(st.stderr).toContain(half);
    const target = join(dir, "never-truncated");
    const rs = await restoreWith(half, ["--skip-hash-check", `--data-dir=${target}`]);
    expect(rs.code).not.toBe(0);
    // etcdctl may leave the data dir it had begun (see above); ours never does.
    if (!TARGET_ETCD) expect(existsSync(target)).toBe(false);
  });

  it("restore with --skip-hash-check makes a data dir the target serves the member's data from", async () => {
    await restoreAndServe(oursSnap.db, oursSnap, "own-db", ["--skip-hash-check"]);
  }, 120_000);

  it("restore of the db with its SHA-256 appended (etcetera's snapshot of the SQLite days) checks the hash and serves the data", async () => {
    await restoreAndServe(withHashTrailer(oursSnap.db, "own-db-hashed.db"), oursSnap, "own-db-hashed");
  }, 120_000);
});
