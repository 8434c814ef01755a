/**
 * etcd's data dir as etcetera's input. Real etcd 3.4 (whatever E2E_TARGET says) writes the data:
 * a stopped member's data dir, and the data dir `etcdctl snapshot restore` makes from real etcd's
 * snapshot. The target then starts on that dir: etcetera imports it on its first start; against
 * etcd (E2E_TARGET=etcd) the same checks are etcd's own restart, the reference. Both must serve
 * identical data (every key with its revisions, version and lease, the compaction, the revision),
 * the lease with its TTL, users and roles (auth enabled), the member list and cluster id, and accept
 * a write at the next revision.
 *
 * Ids: member, cluster and lease ids are exact 64-bit on both; the lease takes an id of etcd's
 * shape (63 bits, far above 2^53) chosen by the client, so both targets hold the same one. The single members advertise a fixed peer URL
 * with a token that gives known ids (a single member never dials its own peer URL).
 */
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { etcdWalRecords } from "../etcd_format/etcd_data.js";
import { reservePort } from "../ports.js";
import { clients, unary } from "./grpc_client.js";
import { Cluster, etcdctl, eventually, Member, TARGET_ETCD, type CtlResult } from "./harness.js";

/** etcd's member id for this peer URL and token (sha1 of both), checked against etcd's member list. */
const TOKEN = "etcetera-import-1504462";
const PEER_URL = "http://127.0.0.1:1";
const MEMBER_ID = "3d04818883d79";
const LEASE_ID = 0x694d_8a3c_1b2a_4e04n;
const PASSWORD = "pw-import";

const dir = mkdtempSync(join(tmpdir(), "etcetera-etcd-import-"));
const running: Member[] = [];
afterAll(async () => {
  for (const m of running) await m.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function member(name: string, target: "etcd" | "etcetera", moreClientUrls: readonly string[] = []): Promise<Member> {
  const clientPort = await reservePort();
  const peerPort = await reservePort();
  const dataDir = join(dir, `${name}.etcd`);
  const m = new Member({ name: "n1", clientPort, peerPort, dataDir }, [
    "--name=n1",
    `--data-dir=${dataDir}`,
    `--listen-client-urls=http://127.0.0.1:${clientPort}`,
    `--advertise-client-urls=${[`http://127.0.0.1:${clientPort}`, ...moreClientUrls].join(",")}`,
    `--listen-peer-urls=http://127.0.0.1:${peerPort}`,
    `--initial-advertise-peer-urls=${PEER_URL}`,
    `--initial-cluster=n1=${PEER_URL}`,
    `--initial-cluster-token=${TOKEN}`,
    "--log-level=info",
  ], {}, target);
  running.push(m);
  return m;
}

/** The same member's flags on another process (the target on the source's data dir). */
function onSameDir(source: Member, target: "etcd" | "etcetera"): Member {
  const m = new Member(source.spec, source.args, {}, target);
  running.push(m);
  return m;
}

const TARGET: "etcd" | "etcetera" = TARGET_ETCD ? "etcd" : "etcetera";

async function ok(m: Member, args: string[], auth = true): Promise<string> {
  const r: CtlResult = await etcdctl(m.endpoint, [...(auth ? [`--user=root:${PASSWORD}`] : []), ...args]);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${m.log.slice(-4000)}`);
  return r.stdout;
}

/** Writes a history with overwrites, a delete, a compaction, a txn, a lease, users and roles; enables auth. */
async function writeHistory(m: Member): Promise<void> {
  for (let i = 0; i < 20; i++) await ok(m, ["put", `k${i % 7}`, `v${i}`], false);
  await ok(m, ["del", "k3"], false);
  await ok(m, ["compact", "10"], false);
  await ok(m, ["txn"], false).catch(() => undefined);
  const c = clients(m.endpoint);
  try {
    await unary(c.lease, "LeaseGrant", { TTL: 600, ID: String(LEASE_ID) });
  } finally {
    c.close();
  }
  await ok(m, ["put", "leased", "x", `--lease=${LEASE_ID.toString(16)}`], false);
  await ok(m, ["put", "bin\u00ff", "after-compaction"], false);
  await ok(m, ["user", "add", `root:${PASSWORD}`], false);
  await ok(m, ["user", "add", "alice:alice-pw"], false);
  await ok(m, ["role", "add", "reader"], false);
  await ok(m, ["role", "grant-permission", "reader", "read", "k", "--prefix"], false);
  await ok(m, ["user", "grant-role", "alice", "reader"], false);
  await ok(m, ["auth", "enable"], false);
}

interface View {
  revision: number;
  kvs: unknown;
  history: unknown;
  compactedError: string;
  lease: { ttl: number; grantedTtl: number; keys: string[] };
  users: string;
  alice: string;
  roles: string;
  reader: string;
  members: unknown;
  clusterId: string;
  /** HashKV at the current revision and the compaction it reports: etcd's hash of the same rows. */
  hashKv: { hash: number; compactRevision: number };
}

/** Everything a client sees of the data, in comparable form. */
async function view(m: Member): Promise<View> {
  const all = JSON.parse(await ok(m, ["get", "", "--prefix", "-w", "json"])) as { header: { revision: number; cluster_id: string | number }; kvs: unknown };
  const history = JSON.parse(await ok(m, ["get", "k", "--prefix", "--rev=12", "-w", "json"])) as { kvs: unknown };
  const compacted = await etcdctl(m.endpoint, [`--user=root:${PASSWORD}`, "get", "k1", "--rev=5"]);
  const ttl = JSON.parse(await ok(m, ["lease", "timetolive", LEASE_ID.toString(16), "--keys", "-w", "json"])) as { ttl: number; "granted-ttl": number; keys?: string[] };
  const members = JSON.parse(await ok(m, ["member", "list", "-w", "json"])) as { header: { cluster_id: string | number }; members: { ID: string | number; name: string; peerURLs: string[] }[] };
  const [hashed] = JSON.parse(await ok(m, ["endpoint", "hashkv", "-w", "json"])) as { HashKV: { hash: number; compact_revision: number } }[];
  return {
    revision: all.header.revision,
    kvs: all.kvs,
    history: history.kvs,
    compactedError: compacted.stderr.trim().split("\n").pop() ?? "",
    lease: { ttl: ttl.ttl, grantedTtl: ttl["granted-ttl"], keys: (ttl.keys ?? []).map((k) => Buffer.from(k, "base64").toString()) },
    users: await ok(m, ["user", "list"]),
    alice: await ok(m, ["user", "get", "alice"]),
    roles: await ok(m, ["role", "list"]),
    reader: await ok(m, ["role", "get", "reader"]),
    members: members.members.map((x) => ({ id: BigInt(x.ID).toString(16), name: x.name, peerURLs: x.peerURLs })).sort((a, b) => a.name.localeCompare(b.name)),
    clusterId: BigInt(all.header.cluster_id).toString(16),
    hashKv: { hash: hashed!.HashKV.hash, compactRevision: hashed!.HashKV.compact_revision },
  };
}

function expectSameData(after: View, before: View): void {
  expect((before.kvs as unknown[]).length).toBe(8);
  expect(after.kvs).toEqual(before.kvs);
  expect(after.history).toEqual(before.history);
  expect(after.revision).toBe(before.revision);
  expect(after.compactedError).toBe("Error: etcdserver: mvcc: required revision has been compacted");
  expect(after.lease.grantedTtl).toBe(600);
  expect(after.lease.keys).toEqual(["leased"]);
  // etcd 3.4 restarts an unchekpointed lease at its full TTL.
  expect(after.lease.ttl).toBeGreaterThan(500);
  expect(after.users).toBe(before.users);
  expect(after.alice).toBe(before.alice);
  expect(after.roles).toBe(before.roles);
  expect(after.reader).toBe(before.reader);
  expect(after.members).toEqual(before.members);
  expect(after.clusterId).toBe(before.clusterId);
  // `etcdctl endpoint hashkv` agrees across the move: the same rows hash as etcd hashed them.
  expect(before.hashKv.compactRevision).toBe(10);
  expect(after.hashKv).toEqual(before.hashKv);
}

async function expectNextWrite(m: Member, before: View): Promise<void> {
  const put = JSON.parse(await ok(m, ["put", "after-import", "y", "-w", "json"])) as { header: { revision: number } };
  expect(put.header.revision).toBe(before.revision + 1);
  const got = JSON.parse(await ok(m, ["get", "after-import", "-w", "json"])) as { kvs: { create_revision: number; version: number }[] };
  expect(got.kvs[0]).toMatchObject({ create_revision: before.revision + 1, version: 1 });
  // alice reads under her role, and nothing else: the imported auth state is enforced.
  const aliceRead = await etcdctl(m.endpoint, ["--user=alice:alice-pw", "get", "k1"]);
  expect(aliceRead.code, aliceRead.stderr).toBe(0);
  const aliceWrite = await etcdctl(m.endpoint, ["--user=alice:alice-pw", "put", "k1", "no"]);
  expect(aliceWrite.stderr).toContain("permission denied");
}

/**
 * A power cut inside etcd's last WAL record, as etcd's decoder recognises one (decoder.isTornEntry):
 * the record's data crosses a 512-byte sector, and from a sector boundary inside it to the end of
 * the preallocated segment nothing reached the disk. The record must start at or after `from`.
 * Returns the torn record's offset.
 */
function tearLastRecord(walDir: string, from: number): number {
  const file = lastWalSegment(walDir);
  const buf = readFileSync(file);
  const victim = etcdWalRecords(buf).filter((r) => r.start >= from && Math.floor((r.end - 1) / 512) * 512 > r.start + 8).at(-1);
  expect(victim, `a record after ${from} crossing a sector`).toBeDefined();
  const cut = Math.floor((victim!.end - 1) / 512) * 512;
  buf.fill(0, cut);
  writeFileSync(file, buf);
  return victim!.start;
}

function lastWalSegment(walDir: string): string {
  return join(walDir, readdirSync(walDir).filter((n) => n.endsWith(".wal")).sort().at(-1)!);
}

/** The used bytes of etcd's last WAL segment (its preallocated zeros after the last record). */
function walEnd(walDir: string): number {
  return etcdWalRecords(readFileSync(lastWalSegment(walDir))).at(-1)?.end ?? 0;
}

function sha256(path: string): string {
  return createHash("sha256").update(readFileSync(path)).digest("hex");
}

describe(`etcd's data dir as input (${TARGET} on real etcd's files)`, () => {
  it("a stopped etcd 3.4 member's data dir: identical data, next write at the next revision", async () => {
    const source = await member("stopped", "etcd");
    source.start();
    await source.waitReady();
    await writeHistory(source);
    const before = await view(source);
    expect(before.members).toEqual([{ id: MEMBER_ID, name: "n1", peerURLs: [PEER_URL] }]);
    await source.kill("SIGTERM");
    const dbHash = sha256(join(source.spec.dataDir, "member", "snap", "db"));

    const target = onSameDir(source, TARGET);
    target.start();
    await target.waitReady();
    expectSameData(await view(target), before);
    await expectNextWrite(target, before);
    if (TARGET === "etcetera") {
      expect(target.log).toContain("imported etcd's data dir");
      // etcd's files are kept as they were.
      expect(sha256(join(source.spec.dataDir, "member.etcd-original", "snap", "db"))).toBe(dbHash);
    }
    await target.kill("SIGTERM");
    // A restart serves the imported data again (and does not import twice).
    target.start();
    await target.waitReady();
    const again = await view(target);
    expect(again.revision).toBe(before.revision + 1);
    expect(again.kvs).toEqual(expect.arrayContaining(before.kvs as unknown[]));
    await target.kill("SIGTERM");
  }, 120_000);

  it("a member etcd repaired after a power cut (a torn last WAL record cut off, <segment>.broken kept), stopped after its restart: identical data", async () => {
    // Many advertised client URLs make the restart's publish (a v2 request) span sectors, so the
    // cut lands inside it: a record written after everything the backend holds, as a power cut
    // can only tear records not yet synced (etcd syncs its WAL before it applies).
    const more = Array.from({ length: 24 }, (_, i) => `http://advertised-${i}.etcd-import.invalid:2379`);
    const source = await member("repaired", "etcd", more);
    source.start();
    await source.waitReady();
    await writeHistory(source);
    const before = await view(source);
    await source.kill("SIGTERM");
    const walDir = join(source.spec.dataDir, "member", "wal");
    const cleanEnd = walEnd(walDir);
    // The restart appends a new term, an empty entry and its publish; then the power goes.
    source.start();
    await source.waitReady();
    await eventually(async () => ((await ok(source, ["member", "list"])).includes("advertised-23") ? true : undefined), 10_000, "the restart's publish applied");
    await source.kill("SIGKILL");
    const tornAt = tearLastRecord(walDir, cleanEnd);

    // etcd's next start repairs the WAL (the reference for what survives), and it is stopped cleanly.
    source.start();
    await source.waitReady();
    expect(source.log).toContain("repaired WAL error (unexpected EOF)");
    const repaired = await view(source);
    expectSameData(repaired, before);
    await source.kill("SIGTERM");
    const segments = readdirSync(walDir);
    expect(segments.filter((n) => n.endsWith(".wal.broken")), `etcd kept the torn segment (cut at ${tornAt})`).toHaveLength(1);

    const target = onSameDir(source, TARGET);
    target.start();
    await target.waitReady();
    expectSameData(await view(target), repaired);
    await expectNextWrite(target, repaired);
    if (TARGET === "etcetera") {
      expect(target.log).toContain("etcd repaired this WAL");
      expect(target.log).toContain("imported etcd's data dir");
    }
    await target.kill("SIGTERM");
  }, 120_000);

  it("a data dir made by etcdctl snapshot restore from real etcd's snapshot: identical data", async () => {
    const source = await member("snapshot-source", "etcd");
    source.start();
    await source.waitReady();
    await writeHistory(source);
    const before = await view(source);
    const snap = join(dir, "etcd.snapshot.db");
    await ok(source, ["snapshot", "save", snap]);
    await source.kill("SIGTERM");

    const restored = await member("restored", TARGET);
    const r = await etcdctl("127.0.0.1:1", [
      "snapshot",
      "restore",
      snap,
      "--name=n1",
      `--data-dir=${restored.spec.dataDir}`,
      `--initial-cluster=n1=${PEER_URL}`,
      `--initial-advertise-peer-urls=${PEER_URL}`,
      `--initial-cluster-token=${TOKEN}`,
    ]);
    expect(r.code, r.stderr).toBe(0);
    restored.start();
    await restored.waitReady();
    const after = await view(restored);
    // The restored member is the same member (same peer URL and token), now published under its name.
    expectSameData(after, before);
    await expectNextWrite(restored, before);
    if (TARGET === "etcetera") expect(existsSync(join(restored.spec.dataDir, "member.etcd-original", "wal"))).toBe(true);
    await restored.kill("SIGTERM");
  }, 120_000);

  it("a stopped three-member etcd 3.4 cluster: every member's data dir imported, identical data, writes replicate; and back to etcd by snapshot save and restore", async () => {
    const source = await Cluster.create({ size: 3, target: "etcd" });
    try {
      await source.start();
      const [m1] = source.members;
      await writeHistory(m1!);
      const before = await view(m1!);
      expect(before.members).toHaveLength(3);
      await source.stop("SIGTERM");
      const targets = source.members.map((m) => onSameDir(m, TARGET));
      for (const t of targets) t.start();
      await Promise.all(targets.map((t) => t.waitReady(60_000)));
      // Read from the leader (a follower's LeaseTimeToLive forward with auth on, which this test
      // once found broken, has its own test: auth_follower.test.ts).
      const leader = await eventually(async () => {
        for (const t of targets) {
          const st = JSON.parse(await ok(t, ["endpoint", "status", "-w", "json"])) as { Status: { header: { member_id: string | number }; leader: string | number } }[];
          if (BigInt(st[0]!.Status.leader) === BigInt(st[0]!.Status.header.member_id)) return t;
        }
        return undefined;
      }, 60_000, "a leader among the imported members");
      const after = await eventually(() => view(leader), 60_000, "the imported cluster serving a linearizable read").catch((err: unknown) => {
        throw new Error(`${String(err)}\n${targets.map((t) => `==== ${t.spec.name}\n${t.log.slice(-3000)}`).join("\n")}`);
      });
      expectSameData(after, before);
      await expectNextWrite(targets[1]!, before);
      // The write reached every member (each serves it from its own store).
      for (const t of targets) {
        await eventually(async () => {
          const r = await etcdctl(t.endpoint, [`--user=root:${PASSWORD}`, "get", "after-import", "--consistency=s", "--print-value-only"]);
          return r.stdout.trim() === "y" ? true : undefined;
        }, 30_000, `after-import on ${t.spec.name}`);
      }
      if (TARGET === "etcetera") for (const t of targets) expect(t.log).toContain("imported etcd's data dir");

      // And back: a snapshot from the target, restored by etcdctl for each member, real etcd on the restored dirs.
      const onTarget = await view(leader);
      const snap = join(dir, "cluster.snapshot.db");
      await ok(targets[0]!, ["snapshot", "save", snap]);
      for (const t of targets) await t.kill("SIGTERM");
      const initialCluster = source.members.map((m) => `${m.spec.name}=http://127.0.0.1:${m.spec.peerPort}`).join(",");
      const back = source.members.map((m) => {
        const restoredDir = `${m.spec.dataDir}.back`;
        const args = m.args.map((a) => (a.startsWith("--data-dir=") ? `--data-dir=${restoredDir}` : a));
        const e = new Member({ ...m.spec, dataDir: restoredDir }, args, {}, "etcd");
        running.push(e);
        return e;
      });
      for (const e of back) {
        const r = await etcdctl("127.0.0.1:1", [
          "snapshot",
          "restore",
          snap,
          `--name=${e.spec.name}`,
          `--data-dir=${e.spec.dataDir}`,
          `--initial-cluster=${initialCluster}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${e.spec.peerPort}`,
          "--initial-cluster-token=e2e-token",
        ]);
        expect(r.code, r.stderr).toBe(0);
      }
      for (const e of back) e.start();
      await Promise.all(back.map((e) => e.waitReady(60_000)));
      const onEtcd = await eventually(() => view(back[0]!), 60_000, "etcd serving the cluster restored from the target's snapshot");
      expect(onEtcd.kvs).toEqual(onTarget.kvs);
      expect(onEtcd.revision).toBe(onTarget.revision);
      expect(onEtcd.users).toBe(onTarget.users);
      expect(onEtcd.reader).toBe(onTarget.reader);
      expect(onEtcd.lease.keys).toEqual(["leased"]);
      expect(onEtcd.members).toEqual(before.members);
      const put = JSON.parse(await ok(back[2]!, ["put", "back-on-etcd", "z", "-w", "json"])) as { header: { revision: number } };
      expect(put.header.revision).toBe(onTarget.revision + 1);
      for (const e of back) await e.kill("SIGTERM");
    } finally {
      await source.destroy();
    }
  }, 240_000);
});
