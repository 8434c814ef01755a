/**
 * Defrag of one member never stalls the others (issue 15). Three members, a backend of ~130 MiB
 * written with 1 MiB values and then mostly deleted and compacted, so the defrag has work; then
 * the leader, and later a follower, is defragmented while a writer keeps putting through another
 * member. Writes issued after the defragged member logged "defragmenting" (both servers log it
 * just before the rewrite) complete before the defrag answers: the cluster kept committing.
 * (etcetera's leader hands leadership on first, defrag.ts; etcd's keeps heartbeating from its raft
 * goroutines.) Afterwards no acknowledged write is missing on any member, the defragged member's
 * dbSize shrank, and HashKV at one revision is the same on all members. Both targets.
 *
 * Both log as zap (JSON lines). The election timeout is long (5 s) so a leader that stalled would not be replaced by an
 * election within the defrag either: only a cluster that kept committing passes.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, eventually, sleep, TARGET_ETCD, type Member } from "./harness.js";
import { clients, unary } from "./grpc_client.js";
import { agreedLeader } from "./ops_helpers.js";

const VALUE_BYTES = 1024 * 1024;
const BIG_KEYS = 130;
/** Keys kept of the big ones: the defrag keeps about this much. */
const BIG_KEPT = 10;
const DEFRAG_DEADLINE_MS = 180_000;
/** The writer's bound on puts in flight. */
const WRITES_INFLIGHT_MAX = 64;

let cluster: Cluster;
const conns = new Map<Member, ReturnType<typeof clients>>();
const conn = (m: Member) => {
  let c = conns.get(m);
  if (c === undefined) conns.set(m, (c = clients(m.endpoint)));
  return c;
};
/** Members defragmented so far (their free pages are gone; the next run picks another). */
const defragged = new Set<Member>();

const key = (prefix: string, i: number) => Buffer.from(`${prefix}${String(i).padStart(6, "0")}`);

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: ["--heartbeat-interval=100", "--election-timeout=5000", "--logger=zap"] });
  await cluster.start();
  const { member: leader } = await agreedLeader(cluster);
  const kv = conn(leader).kv;
  const value = Buffer.alloc(VALUE_BYTES, 0x61);
  // A few puts in flight: quick to write, bounded in memory.
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      while (next < BIG_KEYS) await unary(kv, "Put", { key: key("big/", next++), value }, { deadlineMs: 60_000 });
    }),
  );
  await unary(kv, "DeleteRange", { key: key("big/", 0), range_end: key("big/", BIG_KEYS - BIG_KEPT) });
  const r = await unary<{ header: { revision: string } }>(kv, "Range", { key: Buffer.from("big/") });
  await unary(kv, "Compact", { revision: r.header.revision, physical: true }, { deadlineMs: 60_000 });
  // etcd's bbolt frees the compacted pages only once no transaction can still read them, and
  // counts them in dbSizeInUse at its next commit: write a little until every member shows them free.
  for (const m of cluster.members) {
    await eventually(
      async () => {
        await unary(kv, "Put", { key: Buffer.from("tick"), value: Buffer.from("t") });
        const s = await sizes(m);
        return s.dbSizeInUse < s.dbSize / 2 ? s : undefined;
      },
      60_000,
      `${m.spec.name}'s compacted pages counted free (dbSizeInUse below half of dbSize)`,
    );
  }
}, 300_000);

afterAll(async () => {
  for (const c of conns.values()) c.close();
  await cluster?.destroy();
});

interface Sizes {
  dbSize: number;
  dbSizeInUse: number;
}

async function sizes(m: Member): Promise<Sizes> {
  const s = await unary<{ dbSize: string; dbSizeInUse: string }>(conn(m).maintenance, "Status", {});
  return { dbSize: Number(s.dbSize), dbSizeInUse: Number(s.dbSizeInUse) };
}

const DEFRAGMENTING = /"msg":"defragmenting"/g;
const defragmentingLines = (m: Member) => m.log.match(DEFRAGMENTING)?.length ?? 0;

/**
 * Defragments `target` while a writer puts `prefix` keys through `via`, then checks that the
 * cluster kept committing, lost nothing, shrank the file and agrees on HashKV.
 */
async function defragUnderLoad(target: Member, via: Member, prefix: string): Promise<void> {
  const before = await sizes(target);
  expect(before.dbSize, "the backend was written big").toBeGreaterThan((BIG_KEYS * VALUE_BYTES) / 2);
  expect(before.dbSizeInUse, "most of it is free pages").toBeLessThan(before.dbSize / 2);
  const linesBefore = defragmentingLines(target);

  const acked: Buffer[] = [];
  let failed = 0;
  let answered = false;
  let writing = true;
  /** Puts issued after the target logged "defragmenting" that were acknowledged before the defrag answered. */
  let committedDuringDefrag = 0;
  // Open loop: a new put every few ms whatever the earlier ones do, since a put proposed while
  // leadership moves is dropped by raft and waits out the request timeout (as in etcd); a closed
  // loop would sit in that one put for the whole defrag.
  const inflight = new Set<Promise<void>>();
  const put = async (k: Buffer): Promise<void> => {
    const issuedDuring = defragmentingLines(target) > linesBefore;
    try {
      await unary(conn(via).kv, "Put", { key: k, value: Buffer.from("v") }, { deadlineMs: 30_000 });
      acked.push(k);
      if (issuedDuring && !answered) committedDuringDefrag++;
    } catch {
      failed++; // unknown outcome (a leader change under way): not acknowledged, not counted
    }
  };
  const writer = (async () => {
    for (let i = 0; writing; i++) {
      if (inflight.size < WRITES_INFLIGHT_MAX) {
        const p = put(key(prefix, i)).finally(() => inflight.delete(p));
        inflight.add(p);
      }
      await sleep(5);
    }
    await Promise.all(inflight);
  })();

  await unary(conn(target).maintenance, "Defragment", {}, { deadlineMs: DEFRAG_DEADLINE_MS });
  answered = true;
  writing = false;
  await writer;
  defragged.add(target);
  expect(defragmentingLines(target), `${target.spec.name} logged "defragmenting"`).toBeGreaterThan(linesBefore);
  expect(committedDuringDefrag, `writes through ${via.spec.name} committed while ${target.spec.name} defragmented (acked ${acked.length}, failed ${failed}):\n${cluster.logs()}`).toBeGreaterThan(0);

  const after = await sizes(target);
  expect(after.dbSize, `${target.spec.name}'s file shrank`).toBeLessThan(before.dbSize / 2);

  // Every acknowledged write is on every member (a linearizable read through each).
  const last = await unary<{ header: { revision: string } }>(conn(via).kv, "Range", { key: Buffer.from(prefix) });
  for (const m of cluster.members) {
    const r = await unary<{ kvs: Array<{ key: Buffer }> }>(conn(m).kv, "Range", { key: Buffer.from(prefix), range_end: Buffer.from(prefix.slice(0, -1) + "0"), keys_only: true });
    const have = new Set(r.kvs.map((k) => k.key.toString()));
    const lost = acked.filter((k) => !have.has(k.toString()));
    expect(lost.map(String), `acknowledged writes missing on ${m.spec.name}`).toEqual([]);
  }

  // HashKV at one revision agrees everywhere (each member answers once it applied that revision).
  const rev = last.header.revision;
  const hashes = await Promise.all(
    cluster.members.map((m) =>
      eventually(
        async () => (await unary<{ hash: number }>(conn(m).maintenance, "HashKV", { revision: rev })).hash,
        30_000,
        `HashKV at ${rev} on ${m.spec.name}`,
      ),
    ),
  );
  expect(new Set(hashes).size, `HashKV at ${rev}: ${hashes.join(", ")}`).toBe(1);
}

describe("defrag under load", () => {
  it("defragmenting the leader: writes through a follower commit meanwhile, none is lost, its file shrinks, hashes agree", async () => {
    const { member: leader } = await agreedLeader(cluster);
    const via = cluster.members.find((m) => m !== leader)!;
    await defragUnderLoad(leader, via, "during-leader/");
    // deviation: defrag-leader-hands-off — etcd's leader defragments as leader; etcetera's hands
    // leadership on first (and says so at info), so another member leads afterwards.
    const { member: after } = await agreedLeader(cluster);
    if (TARGET_ETCD) expect(after, "etcd's leader keeps leading through its defrag").toBe(leader);
    else {
      expect(after, "etcetera's leader handed leadership on before vacuuming").not.toBe(leader);
      expect(leader.log).toMatch(/"level":"info".*"reason":"defragment blocks this member[^"]*".*"msg":"transferring leadership before defragment"/);
    }
  }, 300_000);

  it("defragmenting a follower: writes through another member commit meanwhile, none is lost, its file shrinks, hashes agree", async () => {
    const { member: leader } = await agreedLeader(cluster);
    const target = cluster.members.find((m) => m !== leader && !defragged.has(m));
    if (target === undefined) throw new Error(`no follower left with free pages (defragged: ${[...defragged].map((m) => m.spec.name).join(", ")})`);
    const via = cluster.members.find((m) => m !== target)!;
    await defragUnderLoad(target, via, "during-follower/");
  }, 300_000);
});

