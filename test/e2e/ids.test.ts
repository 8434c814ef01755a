/**
 * Member and cluster ids over all 64 bits, derived as etcd 3.4 derives them: the same --name,
 * --initial-cluster and --initial-cluster-token give the same ids on etcd and on etcetera.
 *
 * etcdctl's JSON prints ids as Go uint64s (decimal numbers up to 2^64-1), which JSON.parse would
 * round: ids are read from the raw text.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reservePort } from "../ports.js";
import { etcdctl, eventually, Member, newClusterArgs, TARGET_ETCD, type MemberSpec, type Target } from "./harness.js";
import { DynamicCluster } from "./membership_harness.js";

const TOKEN = "ids-e2e-token";

/** etcd's membership.NewMember id: sha1(sorted peer URLs joined + token), first 8 bytes big-endian. */
function etcdMemberId(peerUrls: string[], token: string): bigint {
  return createHash("sha1").update([...peerUrls].sort().join("") + token).digest().readBigUInt64BE(0);
}

/** etcd's RaftCluster.genID: sha1 of the sorted member ids as big-endian words, first 8 bytes. */
function etcdClusterId(ids: bigint[]): bigint {
  const words = Buffer.alloc(8 * ids.length);
  [...ids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)).forEach((id, i) => words.writeBigUInt64BE(id, 8 * i));
  return createHash("sha1").update(words).digest().readBigUInt64BE(0);
}

interface Ids {
  clusterId: bigint;
  /** The member that answered (the response header's member_id). */
  memberId: bigint;
  /** Member ids by name, as `member list` reports them. */
  members: Map<string, bigint>;
  /** `member list` (table) text: ids as etcdctl prints them, in hex. */
  table: string;
}

/** `etcdctl member list -w json` read exactly (ids as bigints from the raw digits). */
async function memberIds(endpoint: string): Promise<Ids> {
  const r = await etcdctl(endpoint, ["member", "list", "-w", "json"]);
  expect(r.code, r.stderr).toBe(0);
  const clusterId = BigInt(/"cluster_id":(\d+)/.exec(r.stdout)![1]!);
  const memberId = BigInt(/"member_id":(\d+)/.exec(r.stdout)![1]!);
  const members = new Map<string, bigint>();
  for (const m of r.stdout.matchAll(/"ID":(\d+),"name":"([^"]*)"/g)) members.set(m[2]!, BigInt(m[1]!));
  const table = await etcdctl(endpoint, ["member", "list"]);
  expect(table.code, table.stderr).toBe(0);
  return { clusterId, memberId, members, table: table.stdout };
}

/** Members with etcd's flags on the given ports (both targets get the very same flags). */
function membersOn(specs: MemberSpec[], target: Target): Member[] {
  return specs.map((s) => new Member(s, newClusterArgs(s, specs, TOKEN), {}, target));
}

async function runAndRead(specs: MemberSpec[], target: Target): Promise<Ids> {
  const members = membersOn(specs, target);
  try {
    for (const m of members) m.start();
    await Promise.all(members.map((m) => m.waitReady()));
    return await memberIds(members[0]!.endpoint);
  } finally {
    await Promise.all(members.map((m) => m.kill("SIGKILL")));
  }
}

describe("member and cluster ids are etcd's, all 64 bits", () => {
  const cluster: { dir: string; members: Member[] } = { dir: "", members: [] };

  beforeAll(async () => {
    cluster.dir = mkdtempSync(join(tmpdir(), "etcetera-ids-"));
    const specs: MemberSpec[] = [];
    for (let i = 1; i <= 3; i++) {
      specs.push({ name: `n${i}`, clientPort: await reservePort(), peerPort: await reservePort(), dataDir: join(cluster.dir, `n${i}.etcd`) });
    }
    cluster.members = membersOn(specs, TARGET_ETCD ? "etcd" : "etcetera");
    for (const m of cluster.members) m.start();
    await Promise.all(cluster.members.map((m) => m.waitReady()));
  }, 60_000);

  afterAll(async () => {
    await Promise.all(cluster.members.map((m) => m.kill("SIGKILL")));
    if (cluster.dir !== "") rmSync(cluster.dir, { recursive: true, force: true });
  });

  it("member list and the response header carry the ids etcd derives from the flags", async () => {
    const got = await memberIds(cluster.members[0]!.endpoint);
    const expected = new Map(cluster.members.map((m) => [m.spec.name, etcdMemberId([`http://127.0.0.1:${m.spec.peerPort}`], TOKEN)]));
    expect(got.members).toEqual(expected);
    expect(got.clusterId).toBe(etcdClusterId([...expected.values()]));
    expect(got.memberId).toBe(expected.get("n1"));
    // etcdctl prints each id as etcd's types.ID: lower-case hex, the full 64 bits.
    for (const id of expected.values()) expect(got.table).toContain(id.toString(16));
  });

  it("endpoint status names the leader and the answering member with exact ids", async () => {
    const r = await etcdctl(cluster.members[1]!.endpoint, ["endpoint", "status", "-w", "json"]);
    expect(r.code, r.stderr).toBe(0);
    const memberId = BigInt(/"member_id":(\d+)/.exec(r.stdout)![1]!);
    const leader = BigInt(/"leader":(\d+)/.exec(r.stdout)![1]!);
    const ids = cluster.members.map((m) => etcdMemberId([`http://127.0.0.1:${m.spec.peerPort}`], TOKEN));
    expect(memberId).toBe(ids[1]);
    expect(ids).toContain(leader);
  });
});

describe("the same flags give the same ids on etcd and on etcetera (direct comparison)", () => {
  it("member ids, cluster id and the answering member id are equal", async () => {
    const dir = mkdtempSync(join(tmpdir(), "etcetera-ids-"));
    try {
      const specs: MemberSpec[] = [];
      for (let i = 1; i <= 3; i++) specs.push({ name: `n${i}`, clientPort: await reservePort(), peerPort: await reservePort(), dataDir: "" });
      const withDir = (target: Target) => specs.map((s) => ({ ...s, dataDir: join(dir, `${target}-${s.name}.etcd`) }));
      const etcd = await runAndRead(withDir("etcd"), "etcd");
      const ours = await runAndRead(withDir("etcetera"), "etcetera");
      expect(ours.members).toEqual(etcd.members);
      expect(ours.clusterId).toBe(etcd.clusterId);
      expect(ours.memberId).toBe(etcd.memberId);
      // At least one of three sha1-derived ids has its top bit set with probability 7/8; the
      // check above is what matters, this one says whether this run exercised ids past 2^63.
      expect([...etcd.members.values()].every((id) => id > 0n)).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

describe("a member id with the top bit set round-trips through member add/update/promote/remove", () => {
  let c: DynamicCluster;

  beforeAll(async () => {
    c = await DynamicCluster.create(1);
    await c.start();
  }, 60_000);

  afterAll(async () => {
    await c?.destroy();
  });

  it("etcdctl names it by its 16 hex digits in every call", async () => {
    const first = c.members[0]!;
    // A runtime-added member's id hashes its peer URL and the time: one add in two has the top bit
    // set. Up to 40 tries (2^-40 to miss): CI of 7f43a35 missed in 12 against etcd (1 in 4,096).
    let added: { member: Member; id: string } | undefined;
    const seen: string[] = [];
    for (let attempt = 0; attempt < 40 && added === undefined; attempt++) {
      const a = await c.add(`l${attempt}`, [first], { learner: true, start: false });
      seen.push(a.id);
      if (BigInt(`0x${a.id}`) >= 2n ** 63n) added = a;
      else await c.removeSettled(a.id, [first], `removal of learner ${a.id}`);
    }
    if (added === undefined) throw new Error(`no member id with the top bit set in ${seen.length} adds: ${seen.join(" ")}`);
    const { member, id } = added;
    expect(id).toMatch(/^[89a-f][0-9a-f]{15}$/);
    expect((await c.list([first])).find((m) => m.id === id)?.isLearner).toBe(true);

    member.start();
    await member.waitReady(60_000);
    await eventually(
      async () => {
        const r = await etcdctl(first.endpoint, ["member", "promote", id]);
        if (r.code !== 0) throw new Error(r.stderr.trim());
        return r.stdout;
      },
      60_000,
      `promotion of ${id}`,
    );
    expect((await c.list([first])).find((m) => m.id === id)?.isLearner).toBe(false);
    // The header of the promoted member's own answers names it.
    const own = await memberIds(member.endpoint);
    expect(own.memberId).toBe(BigInt(`0x${id}`));

    // Updated as a voter: etcd 3.4's MemberUpdate of a learner rewrites its record as a voter's
    // (promote then answers "can only promote a learner member"), etcetera keeps it a learner.
    const update = await etcdctl(first.endpoint, ["member", "update", id, `--peer-urls=http://127.0.0.1:${member.spec.peerPort}`]);
    expect(update.code, update.stderr).toBe(0);
    expect(update.stdout).toContain(`Member ${id} updated in cluster`);
    // etcd's cluster server fills no revision in its headers (the rpc_fields fuzz found ours did).
    const updateJson = await etcdctl(first.endpoint, ["member", "update", id, `--peer-urls=http://127.0.0.1:${member.spec.peerPort}`, "-w", "json"]);
    expect(updateJson.code, updateJson.stderr).toBe(0);
    expect((JSON.parse(updateJson.stdout) as { header: { revision?: number } }).header.revision ?? 0).toBe(0);
    const removed = await c.removeSettled(id, [first], `removal of ${id}`);
    expect(removed).toContain(`Member ${id} removed from cluster`);
    expect((await c.list([first])).map((m) => m.id)).not.toContain(id);
  }, 240_000);
});
