/**
 * Garbage below gRPC (issue 7, "garbage on the peer port and on the HTTP port"), on a real
 * 3-member cluster: random bytes, Hellos of another cluster, huge and corrupt frames, HTTP and
 * slowloris on the peer ports; random request lines, huge headers and junk on the client ports'
 * HTTP/1.1 routes. The members keep serving, the cluster keeps its leader (no election: the raft
 * term does not move), the peer transport logs and drops the bad connections, and a member's
 * memory does not grow with them.
 *
 * SEED= replays, FUZZ_SECONDS= lengthens (see fuzz_config.ts).
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { clients, unary } from "../e2e/grpc_client.js";
import { Cluster, TARGET_ETCD } from "../e2e/harness.js";
import { fuzzRun, scaled, timeoutMs } from "./fuzz_config.js";
import { gcControlArgs, sampleAfterGc, startWithGcControl } from "./gc_control.js";
import { runBounded } from "./pool.js";
import { httpGarbage, PEER_GARBAGE_KINDS, type PeerGarbageKind, peerGarbage, sendRaw } from "./port_garbage.js";
import { Rng } from "./rng.js";
import { FRAME_HEADER_BYTES } from "../../src/server/transport/frame.js";
import { leakCheck } from "./rss.js";
import { assertServing, memberTarget } from "./target.js";

const run = fuzzRun("ports");
let cluster: Cluster;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 3, extraArgs: gcControlArgs() });
  await startWithGcControl(cluster);
}, 90_000);

afterAll(async () => {
  await cluster?.destroy();
});

interface RaftView {
  leader: string;
  term: string;
}

/** Leader and raft term as each member sees them (every member must agree). */
async function raftViews(): Promise<RaftView[]> {
  return Promise.all(
    cluster.members.map(async (m) => {
      const c = clients(m.endpoint);
      try {
        const s = await unary<{ leader: string; raftTerm: string }>(c.maintenance, "Status", {});
        return { leader: s.leader, term: s.raftTerm };
      } finally {
        c.close();
      }
    }),
  );
}

async function stableView(): Promise<RaftView> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const views = await raftViews();
    if (views.every((v) => v.leader !== "0" && v.leader === views[0]!.leader && v.term === views[0]!.term)) return views[0]!;
    if (Date.now() > deadline) throw new Error(`members disagree on the leader: ${JSON.stringify(views)}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Writes through one member and reads the value back through another (replication works). */
async function assertReplicates(label: string): Promise<void> {
  const [a, b] = [cluster.members[0]!, cluster.members[2]!];
  const ca = clients(a.endpoint);
  const cb = clients(b.endpoint);
  try {
    const key = Buffer.from(`fuzz-ports/${label}`);
    const put = await unary<{ header: { revision: string } }>(ca.kv, "Put", { key, value: Buffer.from(label) });
    const got = await unary<{ kvs: { value: Buffer }[] }>(cb.kv, "Range", { key });
    expect(got.kvs[0]?.value.toString(), `read back through ${b.spec.name} at revision ${put.header.revision}`).toBe(label);
  } finally {
    ca.close();
    cb.close();
  }
}

describe("ports: garbage on the peer and client ports of a 3-member cluster", () => {
  test("peer ports: bad connections are dropped and logged; the leader and term stay; members serve", async () => {
    const before = await stableView();
    const perKind = new Map<PeerGarbageKind, { n: number; closed: number; replied: number }>();
    const stopAt = Date.now() + run.seconds * 1000;
    // Slowloris beside the garbage: connections that trickle a byte every 500 ms and never finish a Hello.
    const slowloris = Promise.all(
      Array.from({ length: scaled(run, 40, 10) }, (_, i) => {
        const m = cluster.members[i % cluster.members.length]!;
        const drip = Array.from({ length: 16 }, (_, k) => Buffer.from([k === 0 ? 0 : 0x41]));
        return sendRaw(m.spec.peerPort, drip, { gapMs: 500, waitMs: 9_000 });
      }),
    );
    const total = await runBounded(
      8,
      (i) => i < scaled(run, 200, 50) || Date.now() < stopAt,
      async (i) => {
        const r = Rng.forCase(run.seed, i);
        const kind = r.pick(PEER_GARBAGE_KINDS);
        const m = cluster.members[r.int(cluster.members.length)]!;
        const bytes = peerGarbage(r, kind);
        // Fewer bytes than a frame header are not yet garbage to the server: it waits for the rest
        // until its handshake timeout (5 s), as it does for the slowloris ones (a long run's 3,031
        // random-bytes connections held two of 1-7 bytes past a 3 s wait).
        const partialHeader = bytes.reduce((n, c) => n + c.length, 0) < FRAME_HEADER_BYTES;
        const o = await sendRaw(m.spec.peerPort, bytes, { waitMs: partialHeader ? 9_000 : 3_000 });
        const s = perKind.get(kind) ?? { n: 0, closed: 0, replied: 0 };
        perKind.set(kind, s);
        s.n++;
        if (o.closedByServer) s.closed++;
        if (o.received.length > 0) s.replied++;
      },
    );
    const drips = await slowloris;
    const dripsClosed = drips.filter((d) => d.closedByServer).length;
    console.log(`[fuzz] ports: ${total} garbage connections to peer ports; slowloris ${dripsClosed}/${drips.length} closed by the server within 9 s`);
    for (const [k, s] of perKind) console.log(`  ${k}: ${s.n} connections, ${s.closed} closed by the server, ${s.replied} answered`);
    const after = await stableView();
    expect(after, "no election: same leader, same term").toEqual(before);
    // deviation: peer-port-garbage-closed (test/deviations.ts)
    if (!TARGET_ETCD) {
      // etcetera's transport: every connection that sent something bad is closed by the server (the
      // handshake timeout, 5 s, covers the slowloris ones), and the refusals are logged.
      for (const [k, s] of perKind) if (k !== "empty-close") expect(s.closed, `${k} connections closed by the server`).toBe(s.n);
      expect(dripsClosed, "slowloris connections closed by the handshake timeout").toBe(drips.length);
      const logs = cluster.members.map((m) => m.log).join("\n");
      expect(logs).toContain("closed peer connection");
      expect(logs).toContain("request cluster ID mismatch");
    }
    for (const m of cluster.members) await assertServing(memberTarget(m), "ports-peer");
    await assertReplicates("after-peer-garbage");
  }, timeoutMs(run, 180_000));

  test("client ports: junk HTTP/1.1 gets an answer or a close, never a hang; members serve", async () => {
    const before = await stableView();
    const statuses = new Map<string, number>();
    const hangs: string[] = [];
    const n = scaled(run, 300, 60);
    await runBounded(
      8,
      (i) => i < n,
      async (i) => {
        const r = Rng.forCase(run.seed ^ 0x4242, i);
        const g = httpGarbage(r);
        const m = cluster.members[r.int(cluster.members.length)]!;
        const o = await sendRaw(m.spec.clientPort, [g.bytes], { waitMs: 8_000 });
        const status = /^HTTP\/1\.[01] (\d{3})/.exec(o.received.toString("latin1"))?.[1];
        if (status === undefined && !o.closedByServer) hangs.push(`#${i} ${g.label}: neither an answer nor a close in 8 s`);
        const key = `${g.label}:${status ?? (o.closedByServer ? "closed" : "none")}`;
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
      },
    );
    console.log(`[fuzz] ports: ${n} junk HTTP/1.1 requests: ${[...statuses].sort().map(([k, c]) => `${k}×${c}`).join(" ")}`);
    expect(hangs.slice(0, 10), `replay: SEED=${run.seed} npx vitest run test/fuzz/ports.test.ts`).toEqual([]);
    expect(await stableView()).toEqual(before);
    for (const m of cluster.members) await assertServing(memberTarget(m), "ports-http");
  }, timeoutMs(run, 120_000));

  test("a member's memory does not grow with garbage peer connections", async () => {
    const m = cluster.members[0]!;
    let i = 0;
    const driver = {
      async run(n: number): Promise<void> {
        const end = i + n;
        await runBounded(
          16,
          () => i < end,
          async () => {
            const r = Rng.forCase(run.seed ^ 0x9999, i++);
            // Kinds the server refuses at once (slowloris is covered above: it only costs time here).
            await sendRaw(m.spec.peerPort, peerGarbage(r, r.pick(["random-bytes", "foreign-hello", "huge-frame", "bad-crc", "http-on-peer-port"] as const)), { waitMs: 3_000 });
          },
        );
      },
    };
    /*
     * Teeth: both samples follow forced full collections. Between them 10,000 garbage connections
     * run. Retaining 1,000 B per connection (the brief's 1 MB per 1,000) adds 9.8 MiB to the live
     * set, 2.4× its 4 MiB bound; retaining 4,000 B (a socket with its buffers and decoder is more)
     * adds 38 MiB to RSS, 1.6× its 24 MiB bound. Measured without a leak: live set +0.2 MiB; RSS
     * up to +22 MiB after a short warm-up (allocator and V8 reservations), hence the longer one.
     */
    await leakCheck(
      () => sampleAfterGc(m),
      {
        live: { what: `ports live set after GC of ${m.spec.name} (garbage peer connections)`, boundKiB: 4 * 1024, leakBytesPerRequest: 1000 },
        rss: { what: `ports RSS less new space after GC of ${m.spec.name} (garbage peer connections)`, boundKiB: 24 * 1024, leakBytesPerRequest: 4000 },
      },
      driver,
      { warmUp: scaled(run, 4_000, 2_000), measured: scaled(run, 10_000, 10_000) },
    );
    await assertServing(memberTarget(m), "ports-leak");
  }, timeoutMs(run, 180_000));
});
