/**
 * Against real etcd 3.4: our reader reads the snapshots etcd writes (every revision, lease,
 * member, user and role), and the snapshots our writer makes pass `etcdctl snapshot status` and
 * `etcdctl snapshot restore`, after which a real etcd serves exactly the data we wrote.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3 } from "etcd3";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  encodeAlarm,
  encodeKeyValue,
  encodeLease,
  encodeMember,
  encodeRevisionKey,
  encodeRole,
  encodeUser,
  EtcdBackendReader,
  leaseKey,
  memberKey,
  snapshotStatus,
  streamEtcdSnapshot,
  writeEtcdSnapshot,
  type EtcdBackendContent,
  type EtcdLease,
  type EtcdRevisionRecord,
} from "../../src/etcd_format/index.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";
import { compacted, ctlKvOf, liveState, normalizeCtlKvs, parseJsonExact } from "./etcd_state.js";
import { etcdctlLocal, RealEtcd } from "./real_etcd.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-bbolt-"));
const started: RealEtcd[] = [];

async function startEtcd(name: string): Promise<RealEtcd> {
  const e = await RealEtcd.create(dir, name);
  started.push(e);
  await e.start();
  return e;
}

afterAll(async () => {
  for (const e of started) await e.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** Every key etcd serves now, as etcdctl prints it. */
async function liveKvs(e: RealEtcd): Promise<{ revision: number; kvs: ReturnType<typeof normalizeCtlKvs> }> {
  const json = parseJsonExact(await e.ok(["get", "", "--prefix", "-w", "json"])) as { header: { revision: number } };
  return { revision: Number(json.header.revision), kvs: normalizeCtlKvs(json) };
}

async function leaseIds(e: RealEtcd): Promise<string[]> {
  const json = parseJsonExact(await e.ok(["lease", "list", "-w", "json"])) as { leases?: { id: string | number }[] };
  return (json.leases ?? []).map((l) => String(l.id)).sort();
}

/** A lease's granted TTL and attached keys (base64), from `lease timetolive --keys`. */
async function leaseInfo(e: RealEtcd, id: bigint): Promise<{ grantedTtl: number; keys: string[] }> {
  const json = parseJsonExact(await e.ok(["lease", "timetolive", id.toString(16), "--keys", "-w", "json"])) as {
    "granted-ttl": number;
    keys?: string[] | null;
  };
  return { grantedTtl: Number(json["granted-ttl"]), keys: [...(json.keys ?? [])].sort() };
}

/** `etcdctl snapshot status -w json` of a file. */
async function ctlStatus(file: string): Promise<{ hash: number; revision: number; totalKey: number; totalSize: number }> {
  const status = await etcdctlLocal(["snapshot", "status", file, "-w", "json"]);
  expect(status.code, status.stderr).toBe(0);
  return JSON.parse(status.stdout) as { hash: number; revision: number; totalKey: number; totalSize: number };
}

/** Checks every stored revision by reading it back with `get --rev`. */
async function expectRevisionsServed(e: RealEtcd, records: EtcdRevisionRecord[]): Promise<void> {
  for (const r of records) {
    if (r.tombstone) continue;
    const json = parseJsonExact(await e.ok(["get", Buffer.from(r.kv.key).toString(), `--rev=${r.main}`, "-w", "json"]));
    expect(normalizeCtlKvs(json), `revision ${r.main}`).toEqual([ctlKvOf(r.kv)]);
  }
}

describe("a snapshot written by real etcd", () => {
  let etcd: RealEtcd;
  const snapshot = join(dir, "from-etcd.db");
  let leases: bigint[] = [];
  const compactRev = 12;

  beforeAll(async () => {
    etcd = await startEtcd("src");
    const leaseA = BigInt("0x" + (await etcd.ok(["lease", "grant", "900"])).split(" ")[1]);
    const leaseB = BigInt("0x" + (await etcd.ok(["lease", "grant", "1200"])).split(" ")[1]);
    leases = [leaseA, leaseB];
    for (let i = 0; i < 40; i++) {
      const lease = i % 10 === 3 ? [`--lease=${leaseA.toString(16)}`] : i % 10 === 7 ? [`--lease=${leaseB.toString(16)}`] : [];
      await etcd.ok(["put", `k/${i % 25}`, `v${i}-${"x".repeat(i * 3)}`, ...lease]);
      if (i % 9 === 8) await etcd.ok(["del", `k/${(i * 7) % 25}`]);
    }
    await etcd.ok(["put", "big", "B".repeat(20_000)]); // an overflow page
    await etcd.ok(["compaction", "--physical", String(compactRev)]);
    await etcd.ok(["user", "add", "alice:secret"]);
    await etcd.ok(["role", "add", "reader"]);
    await etcd.ok(["role", "grant-permission", "reader", "read", "k/", "k0"]);
    await etcd.ok(["user", "grant-role", "alice", "reader"]);
    await etcd.ok(["snapshot", "save", snapshot]);
  });

  it("is read completely: every revision, lease, member, user and role as etcd serves them", async () => {
    const r = EtcdBackendReader.open(snapshot, { requireSnapshotHash: true });
    try {
      expect(r.hashVerified).toBe(true);
      expect(r.bolt.check()).toEqual([]);
      expect(snapshotStatus(snapshot)).toEqual(await ctlStatus(snapshot));
      expect(r.bucketNames()).toEqual(["alarm", "auth", "authRoles", "authUsers", "cluster", "key", "lease", "members", "members_removed", "meta"]);
      const records = [...r.revisions()];
      const live = await liveKvs(etcd);
      expect(liveState(records)).toEqual(live.kvs);
      expect(records[records.length - 1]!.main).toBe(live.revision);
      expect(records.every((x) => x.main >= compactRev || !x.tombstone)).toBe(true);
      // Below the compaction etcd keeps each key's last revision but no longer serves reads at it.
      await expectRevisionsServed(etcd, records.filter((x) => x.main >= compactRev));

      expect([...r.leases()].map((l) => l.id.toString()).sort()).toEqual(await leaseIds(etcd));
      for (const l of r.leases()) expect(l.ttl).toBe((await leaseInfo(etcd, l.id)).grantedTtl);
      expect([...r.leases()].map((l) => l.id).sort()).toEqual([...leases].sort());

      const members = parseJsonExact(await etcd.ok(["member", "list", "-w", "json"])) as { members: { ID: string; name: string; peerURLs: string[] }[] };
      expect(r.members().map((m) => ({ ID: m.id.toString(), name: m.name, peerURLs: m.peerURLs }))).toEqual(
        members.members.map((m) => ({ ID: String(m.ID), name: m.name, peerURLs: m.peerURLs })),
      );
      expect(r.compactRevisions()).toEqual({ scheduled: compactRev, finished: compactRev });
      expect(r.consistentIndex()).toBeGreaterThan(0n);
      expect(r.clusterVersion()).toBe("3.4.0");
      const auth = r.auth()!;
      expect(auth.enabled).toBeUndefined(); // never enabled: etcd stores no authEnabled key
      expect(auth.users.map((u) => [Buffer.from(u.name).toString(), u.roles])).toEqual([["alice", ["reader"]]]);
      expect(auth.roles.map((x) => [Buffer.from(x.name).toString(), x.permissions.map((p) => [p.permType, Buffer.from(p.key).toString(), Buffer.from(p.rangeEnd).toString()])])).toEqual([
        ["reader", [[0, "k/", "k0"]]],
      ]);
    } finally {
      r.close();
    }
  });

  it("holds values byte for byte as our encoders write them (KeyValue, Lease, member JSON, User, Role, AlarmMember)", () => {
    const r = EtcdBackendReader.open(snapshot);
    try {
      const raw = (bucket: string): { key: Buffer; value: Buffer }[] =>
        [...r.bolt.entries(r.bolt.bucket(bucket)!)].map((e) => ({ key: Buffer.from(e.key), value: Buffer.from(e.value) }));
      const keyBucket = raw("key");
      const records = [...r.revisions()];
      expect(keyBucket.length).toBe(records.length);
      records.forEach((rec, i) => {
        expect(encodeRevisionKey(rec.main, rec.sub, rec.tombstone).equals(keyBucket[i]!.key)).toBe(true);
        expect(encodeKeyValue(rec.kv).equals(keyBucket[i]!.value), `revision ${rec.main}`).toBe(true);
      });
      const leaseBucket = raw("lease");
      expect([...r.leases()].map((l) => [leaseKey(l.id).toString("hex"), encodeLease(l).toString("hex")])).toEqual(leaseBucket.map((e) => [e.key.toString("hex"), e.value.toString("hex")]));
      expect(r.members().map((m) => [memberKey(m.id), encodeMember(m).toString()])).toEqual(raw("members").map((e) => [e.key.toString(), e.value.toString()]));
      const auth = r.auth()!;
      expect(auth.users.map((u) => encodeUser(u).toString("hex"))).toEqual(raw("authUsers").map((e) => e.value.toString("hex")));
      expect(auth.roles.map((x) => encodeRole(x).toString("hex"))).toEqual(raw("authRoles").map((e) => e.value.toString("hex")));
      expect(r.alarms().map((a) => encodeAlarm(a).toString("hex"))).toEqual(raw("alarm").map((e) => e.key.toString("hex")));
    } finally {
      r.close();
    }
  });

  it("goes through our writer and back into a real etcd unchanged", async () => {
    const r = EtcdBackendReader.open(snapshot);
    const records = [...r.revisions()];
    const ours = join(dir, "rewritten.db");
    try {
      await writeEtcdSnapshot(ours, r.content()); // streamed from the open reader
    } finally {
      r.close();
    }
    // etcd's content hash covers every bucket, key and value: ours is etcd's, byte for byte.
    const [theirs, mine] = [await ctlStatus(snapshot), await ctlStatus(ours)];
    expect({ hash: mine.hash, revision: mine.revision, totalKey: mine.totalKey }).toEqual({ hash: theirs.hash, revision: theirs.revision, totalKey: theirs.totalKey });
    const target = await RealEtcd.create(dir, "rewritten");
    started.push(target);
    const restore = await etcdctlLocal(["snapshot", "restore", ours, ...target.restoreFlags()]);
    expect(restore.code, restore.stderr).toBe(0);
    await target.start();
    expect(await liveKvs(target)).toEqual(await liveKvs(etcd));
    await expectRevisionsServed(target, records.filter((x) => x.main >= compactRev));
    expect(await leaseIds(target)).toEqual(await leaseIds(etcd));
    for (const id of leases) expect((await leaseInfo(target, id)).keys).toEqual((await leaseInfo(etcd, id)).keys);
    expect(await target.ok(["user", "get", "alice"])).toContain("Roles: reader");
    expect(await target.ok(["role", "get", "reader"])).toContain("[k/, k0)");
    const below = await target.ctl(["get", "k/1", `--rev=${compactRev - 1}`]);
    expect(below.stderr).toContain("required revision has been compacted");
  });
});

describe("a big database written by real etcd's bbolt", () => {
  it("is read completely: multi-level branch pages, free pages, every key etcd serves", async () => {
    const etcd = await startEtcd("big");
    const client = new Etcd3({ hosts: `http://${etcd.endpoint}` });
    const keys = 8_000;
    try {
      for (let i = 0; i < keys; i += 500) {
        await Promise.all(Array.from({ length: 500 }, (_, j) => client.put(`big/${String(i + j).padStart(6, "0")}`).value(`value-${i + j}-${"v".repeat((i + j) % 150)}`)));
      }
      // Deletes leave free pages behind (etcd 3.4 does not persist bbolt's freelist).
      await client.delete().prefix("big/001"); // 1000 keys
    } finally {
      client.close();
    }
    const snapshot = join(dir, "big.db");
    await etcd.ok(["snapshot", "save", snapshot]);
    const r = EtcdBackendReader.open(snapshot, { requireSnapshotHash: true });
    try {
      expect(r.bolt.check()).toEqual([]);
      expect(r.bolt.treeStats(r.bolt.bucket("key")!).depth).toBeGreaterThanOrEqual(3);
      const records = [...r.revisions()];
      expect(records.length).toBe(keys + 1000);
      const live = await liveKvs(etcd);
      expect(records[records.length - 1]!.main).toBe(live.revision);
      const ours = liveState(records);
      expect(ours.length).toBe(live.kvs.length);
      expect(ours.filter((kv, i) => JSON.stringify(kv) !== JSON.stringify(live.kvs[i]))).toEqual([]);
      expect(snapshotStatus(snapshot)).toEqual(await ctlStatus(snapshot));
    } finally {
      r.close();
    }
    // A stopped member's own db (no trailer) reads the same.
    await etcd.stop();
    const db = EtcdBackendReader.open(join(etcd.dataDir, "member", "snap", "db"));
    try {
      expect(db.hashVerified).toBe(false);
      expect(liveState(db.revisions()).length).toBe(keys - 1000);
      expect(db.consistentIndex()).toBeGreaterThan(0n);
    } finally {
      db.close();
    }
  });
});

describe("a snapshot our writer makes", () => {
  /** A history with many keys (multi-level branch pages), big values (overflow pages), deletes and leases with ids above 2^53. */
  function makeContent(rand: () => number): { content: EtcdBackendContent; records: EtcdRevisionRecord[]; leases: EtcdLease[]; compactRev: number } {
    const leases: EtcdLease[] = [
      { id: 0x1234n, ttl: 3000, remainingTtl: 0 },
      { id: 0x694d7b1a2c5e3f04n, ttl: 3600, remainingTtl: 0 },
      { id: 0x7fffffffffff0001n, ttl: 4000, remainingTtl: 0 },
    ];
    const all: EtcdRevisionRecord[] = [];
    const live = new Map<string, { create: number; version: number }>();
    let rev = 1;
    const keyCount = 400;
    for (let i = 0; i < 8000; i++) {
      rev++;
      const name = `key/${String(Math.floor(rand() * keyCount)).padStart(4, "0")}`;
      const key = Buffer.from(name);
      const prev = live.get(name);
      if (prev && rand() < 0.1) {
        all.push({ main: rev, sub: 0, tombstone: true, kv: { key, createRevision: 0, modRevision: 0, version: 0, value: new Uint8Array(0), lease: 0n } });
        live.delete(name);
        continue;
      }
      const big = rand() < 0.01;
      const value = Buffer.alloc(big ? 50_000 + Math.floor(rand() * 60_000) : Math.floor(rand() * 200), 0x61 + (i % 26));
      const lease = rand() < 0.1 ? leases[Math.floor(rand() * leases.length)]!.id : 0n;
      const create = prev?.create ?? rev;
      const version = (prev?.version ?? 0) + 1;
      live.set(name, { create, version });
      all.push({ main: rev, sub: 0, tombstone: false, kv: { key, createRevision: create, modRevision: rev, version, value, lease } });
    }
    const compactRev = 4000;
    const records = compacted(all, compactRev);
    const content: EtcdBackendContent = {
      revisions: records,
      leases,
      consistentIndex: 5000n,
      scheduledCompactRevision: compactRev,
      finishedCompactRevision: compactRev,
      members: [{ id: 0xfedcba9876543210n, name: "old", peerURLs: ["http://10.0.0.1:2380"], clientURLs: ["http://10.0.0.1:2379"], isLearner: false }],
      clusterVersion: "3.4.0",
      auth: {
        enabled: false,
        revision: 7n,
        users: [{ name: Buffer.from("bob"), password: Buffer.from("$2a$10$abcdefghijklmnopqrstuv"), roles: ["writer"], options: { noPassword: false } }],
        roles: [{ name: Buffer.from("writer"), permissions: [{ permType: 1, key: Buffer.from("key/"), rangeEnd: Buffer.from("key0") }] }],
      },
    };
    return { content, records, leases, compactRev };
  }

  it("passes etcdctl snapshot status and restore; real etcd then serves exactly what we wrote", async () => {
    const { content, records, leases, compactRev } = makeContent(mulberry32(testSeed("bbolt etcd_real: our snapshot")));
    const file = join(dir, "ours.db");
    const written = await writeEtcdSnapshot(file, content);
    const last = records[records.length - 1]!.main;
    expect(written.revision).toBe(last);
    const back = EtcdBackendReader.open(file, { requireSnapshotHash: true });
    try {
      expect(back.bolt.check()).toEqual([]);
      const shape = back.bolt.treeStats(back.bolt.bucket("key")!);
      // The key bucket needs two levels of branch pages and has values on overflow pages.
      expect(shape.depth).toBeGreaterThanOrEqual(3);
      expect(shape.overflowPages).toBeGreaterThan(0);
      const flat = (r: EtcdRevisionRecord): string => `${r.main}_${r.sub}${r.tombstone ? "t" : ""} ${JSON.stringify(ctlKvOf(r.kv))}`;
      const readBack = [...back.revisions()].map(flat);
      expect(readBack.length).toBe(records.length);
      expect(readBack.filter((x, i) => x !== flat(records[i]!))).toEqual([]);
    } finally {
      back.close();
    }

    const s = await ctlStatus(file);
    expect(snapshotStatus(file)).toEqual(s);
    // The stream Maintenance.Snapshot will send is byte for byte the file: the same bbolt pages, the same SHA-256.
    const chunks: Buffer[] = [];
    const streamed = await streamEtcdSnapshot(() => content, (c) => void chunks.push(Buffer.from(c.blob)));
    expect(Buffer.concat(chunks).equals(readFileSync(file))).toBe(true);
    expect(streamed.sha256.equals(written.sha256)).toBe(true);
    // totalKey counts every key of every bucket: revisions, leases, the member, user, role, and the fixed keys.
    const fixedKeys = 2 /* auth */ + 1 /* cluster */ + 3 /* meta */;
    expect(s).toMatchObject({ revision: last, totalKey: records.length + leases.length + 1 + 1 + 1 + fixedKeys, totalSize: written.sizeBytes });

    const etcd = await RealEtcd.create(dir, "restored");
    started.push(etcd);
    const restore = await etcdctlLocal(["snapshot", "restore", file, ...etcd.restoreFlags()]);
    expect(restore.code, restore.stderr).toBe(0);
    await etcd.start();

    const served = await liveKvs(etcd);
    expect(served.revision).toBe(last);
    expect(served.kvs).toEqual(liveState(records));
    // A sample of the history (every revision would be thousands of etcdctl runs).
    await expectRevisionsServed(etcd, records.filter((r, i) => r.main > compactRev && (i % 40 === 0 || r.kv.value.length > 10_000)));
    expect((await etcd.ctl(["get", "key/0001", `--rev=${compactRev - 1}`])).stderr).toContain("required revision has been compacted");

    expect(await leaseIds(etcd)).toEqual(leases.map((l) => l.id.toString()).sort());
    const liveKeys = liveState(records);
    for (const l of leases) {
      const info = await leaseInfo(etcd, l.id);
      expect(info.grantedTtl).toBe(l.ttl);
      expect(info.keys).toEqual(liveKeys.filter((k) => k.lease === l.id.toString()).map((k) => k.key).sort());
    }
    expect(await etcd.ok(["user", "get", "bob"])).toContain("Roles: writer");
    expect(await etcd.ok(["role", "get", "writer"])).toContain("[key/, key0)");
  });
});

describe("an empty backend our writer makes", () => {
  it("restores to a real etcd that starts at revision 1 and gives its first put revision 2", async () => {
    const file = join(dir, "empty.db");
    await writeEtcdSnapshot(file, { revisions: [], leases: [], consistentIndex: 0n });
    expect(await ctlStatus(file)).toMatchObject({ revision: 0, totalKey: 1 });
    const etcd = await RealEtcd.create(dir, "empty");
    started.push(etcd);
    const restore = await etcdctlLocal(["snapshot", "restore", file, ...etcd.restoreFlags()]);
    expect(restore.code, restore.stderr).toBe(0);
    await etcd.start();
    expect(await liveKvs(etcd)).toEqual({ revision: 1, kvs: [] });
    await etcd.ok(["put", "first", "1"]);
    expect(await liveKvs(etcd)).toMatchObject({ revision: 2, kvs: [{ create_revision: 2, mod_revision: 2, version: 1 }] });
  });
});
