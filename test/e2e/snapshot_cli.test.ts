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
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
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

/** Writes a history (overwrites, a delete, a txn, a lease with a key) and saves a snapshot of it. */
async function snapshotOf(target: Target, name: string): Promise<{ file: string; kvs: string; revision: number }> {
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
  await c.destroy();
  return { file, kvs: JSON.stringify(all.kvs), revision: all.header.revision };
}

let etcdSnap: { file: string; kvs: string; revision: number };
let oursSnap: { file: string; kvs: string; revision: number };

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

  it("refuses an etcetera snapshot of the SQLite days by file, format and what to do (status and restore)", async () => {
    // What 'etcdctl snapshot save' got from etcetera before its snapshots were etcd's: the member's
    // SQLite backend image, then the SHA-256 of it.
    const image = join(dir, "sqlite-image.db");
    const db = new Database(image);
    db.exec("CREATE TABLE kv (rev INTEGER PRIMARY KEY, key BLOB, value BLOB)");
    db.prepare("INSERT INTO kv VALUES (?, ?, ?)").run(2, Buffer.from("k"), Buffer.from("v"));
    db.close();
    const bytes = readFileSync(image);
    const old = join(dir, "sqlite-days.db");
    writeFileSync(old, Buffer.concat([bytes, createHash("sha256").update(bytes).digest()]));
    const said = `${old}: byte offset 0: an etcetera SQLite snapshot`;
    for (const run of [ours, oursProcess]) {
      const st = await run(["status", old]);
      expect(st.code).not.toBe(0);
      expect(st.stderr).toContain(said);
      expect(st.stderr).toContain("take a new one with 'etcdctl snapshot save'");
      const target = join(dir, `never-${run === ours ? "in" : "proc"}`);
      const rs = await run(["restore", old, `--data-dir=${target}`]);
      expect(rs.code).not.toBe(0);
      expect(rs.stderr).toContain(said);
      expect(existsSync(target)).toBe(false);
    }
    // etcdctl refuses it too, in its own words.
    const ctl = await etcdctl("127.0.0.1:1", ["snapshot", "status", old]);
    expect(ctl.code).not.toBe(0);
  });
});

describe("snapshot restore makes a data dir the target serves the snapshot's data from", () => {
  for (const which of ["real etcd", "the target"]) {
    it(`from a snapshot of ${which}`, async () => {
      const snap = which === "real etcd" ? etcdSnap : oursSnap;
      const [clientPort, peerPort] = [await reservePort(), await reservePort()];
      const dataDir = join(dir, `restored-${which.replace(/ /g, "-")}.etcd`);
      const peer = `http://127.0.0.1:${peerPort}`;
      const flags = [`--data-dir=${dataDir}`, "--name=r1", `--initial-cluster=r1=${peer}`, `--initial-cluster-token=${TOKEN}`, `--initial-advertise-peer-urls=${peer}`];
      // etcd's layout made by etcdctl for etcd (the reference run), etcetera's made by ours.
      const r = TARGET_ETCD ? await etcdctl("127.0.0.1:1", ["snapshot", "restore", snap.file, ...flags]) : await ours(["restore", snap.file, ...flags]);
      expect(r.code, r.stderr).toBe(0);
      // Restoring again over the same data dir is refused, as etcdctl refuses it.
      const again = TARGET_ETCD ? await etcdctl("127.0.0.1:1", ["snapshot", "restore", snap.file, ...flags]) : await ours(["restore", snap.file, ...flags]);
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
    }, 120_000);
  }
});
