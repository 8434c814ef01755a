/**
 * Backup with etcd's own tools: `etcdctl snapshot save` against the target, `etcdctl snapshot
 * status`, `etcdctl snapshot restore` into a new data dir, and real etcd 3.4 (/usr/bin/etcd, the
 * same binary whatever E2E_TARGET says) started on that dir serves the source's data: every key
 * with its value, create and mod revisions, version and lease, the history after the compaction,
 * the compaction itself, and the lease with its attached key. Against etcd this is the reference
 * behaviour; against etcetera it proves the snapshot is etcd's format, byte for byte usable.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { snapshotStatus } from "../../src/etcd_format/index.js";
import { ETCD_BIN } from "../binaries.js";
import { reservePort } from "../ports.js";
import { Cluster, etcdctl, sleep } from "./harness.js";

let cluster: Cluster;
let dir: string;
let restored: ChildProcess | undefined;
let restoredLog = "";

async function ok(endpoints: string, ...args: string[]): Promise<string> {
  const r = await etcdctl(endpoints, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster.logs()}\n${restoredLog.slice(-3000)}`);
  return r.stdout;
}

interface CtlKv {
  key: string;
  value: string;
  create_revision: number;
  mod_revision: number;
  version: number;
  lease?: number;
}

/** `etcdctl get "" --prefix -w json` as comparable records (keys and values decoded). */
async function everything(endpoint: string, rev?: number): Promise<{ revision: number; kvs: CtlKv[] }> {
  const out = JSON.parse(await ok(endpoint, "get", "", "--prefix", "-w", "json", ...(rev !== undefined ? [`--rev=${rev}`] : []))) as {
    header: { revision: number };
    kvs?: CtlKv[];
  };
  const kvs = (out.kvs ?? []).map((kv) => ({
    ...kv,
    key: Buffer.from(kv.key, "base64").toString(),
    value: Buffer.from(kv.value, "base64").toString(),
  }));
  return { revision: out.header.revision, kvs };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "etcetera-snapshot-restore-"));
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
});
afterAll(async () => {
  restored?.kill("SIGKILL");
  await cluster?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

describe("etcdctl snapshot save, status, restore; etcd serves the restored data", () => {
  it("keys, revisions, versions, history, compaction and leases survive", { timeout: 120_000 }, async () => {
    const ep = cluster.members[0]!.endpoint;
    await ok(ep, "put", "a", "1"); // rev 2
    await ok(ep, "put", "b", "2"); // rev 3
    await ok(ep, "put", "b", "3"); // rev 4
    await ok(ep, "put", "c", "x"); // rev 5
    await ok(ep, "del", "c"); // rev 6: a tombstone
    const grant = /lease ([0-9a-f]+) granted/.exec(await ok(ep, "lease", "grant", "600"));
    expect(grant).not.toBeNull();
    const leaseHex = grant![1]!;
    await ok(ep, "put", "l", "leased", `--lease=${leaseHex}`); // rev 7
    await ok(ep, "put", "a", "4"); // rev 8
    await ok(ep, "compact", "4", "--physical"); // keeps a@2, b@4 and everything after 4
    await ok(ep, "put", "d", "5"); // rev 9
    const source = await everything(ep);
    expect(source.revision).toBe(9);
    const history = await everything(ep, 5);

    const file = join(dir, "backup.db");
    const saved = await etcdctl(ep, ["snapshot", "save", file]);
    expect(saved.code, saved.stderr).toBe(0);
    expect(saved.stdout).toBe(`Snapshot saved at ${file}\n`);

    // totalKey counts the keys of every bucket: key (a@2 b@4 c@5 c@6-tombstone l@7 a@8 d@9: 7),
    // meta (consistent_index, scheduledCompactRev, finishedCompactRev), lease (1), members (1),
    // cluster (clusterVersion) and auth (authRevision, auth never enabled): 14.
    const status = JSON.parse(await ok(ep, "snapshot", "status", file, "-w", "json")) as { revision: number; totalKey: number; totalSize: number; hash: number };
    expect({ revision: status.revision, totalKey: status.totalKey }).toEqual({ revision: 9, totalKey: 14 });
    expect(status.totalSize).toBeGreaterThan(0);
    // Our own snapshot status (src/etcd_format) agrees with etcdctl's on the file, hash included.
    expect(snapshotStatus(file, { requireSnapshotHash: true })).toEqual(status);

    const peerPort = await reservePort();
    const clientPort = await reservePort();
    const peerUrl = `http://127.0.0.1:${peerPort}`;
    const dataDir = join(dir, "restored.etcd");
    await ok(
      ep,
      "snapshot",
      "restore",
      file,
      `--data-dir=${dataDir}`,
      "--name=r1",
      `--initial-cluster=r1=${peerUrl}`,
      `--initial-advertise-peer-urls=${peerUrl}`,
      "--initial-cluster-token=restored",
    );
    restored = spawn(
      ETCD_BIN,
      [
        "--name=r1",
        `--data-dir=${dataDir}`,
        `--listen-client-urls=http://127.0.0.1:${clientPort}`,
        `--advertise-client-urls=http://127.0.0.1:${clientPort}`,
        `--listen-peer-urls=${peerUrl}`,
        `--initial-advertise-peer-urls=${peerUrl}`,
        `--initial-cluster=r1=${peerUrl}`,
        "--initial-cluster-token=restored",
      ],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    restored.stdout?.on("data", (b: Buffer) => (restoredLog += b.toString()));
    restored.stderr?.on("data", (b: Buffer) => (restoredLog += b.toString()));
    const deadline = Date.now() + 30_000;
    while (!restoredLog.includes("ready to serve client requests")) {
      if (restored.exitCode !== null || Date.now() > deadline) throw new Error(`restored etcd did not start:\n${restoredLog.slice(-4000)}`);
      await sleep(50);
    }
    const rep = `127.0.0.1:${clientPort}`;

    expect(await everything(rep)).toEqual(source);
    expect(source.kvs.find((kv) => kv.key === "l")?.lease).toBe(Number.parseInt(leaseHex, 16));
    // History after the compaction is kept (c before its deletion), before it is gone.
    expect(await everything(rep, 5)).toEqual(history);
    const compacted = await etcdctl(rep, ["get", "a", "--rev=3"]);
    expect(compacted.code).not.toBe(0);
    expect(compacted.stderr).toContain("required revision has been compacted");
    // The lease, with its key attached.
    expect(await ok(rep, "lease", "list")).toContain(leaseHex);
    const ttl = await ok(rep, "lease", "timetolive", leaseHex, "--keys");
    expect(ttl).toMatch(new RegExp(`^lease ${leaseHex} granted with TTL\\(600s\\), remaining\\(\\d+s\\), attached keys\\(\\[l\\]\\)\\n$`));
  });
});
