import * as net from "node:net";
import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { type Message, MessageType } from "../../src/raft/types.js";
import { Transport } from "../../src/server/transport/transport.js";
import { decodeMessages, encodeHello, encodeHelloOk, ConnectionKind, PROTOCOL_VERSION } from "../../src/server/transport/protocol.js";
import { encodeFrame, FrameDecoder, FrameKind } from "../../src/server/transport/frame.js";
import { captureLogger, connectAll, msg, type Node, startNode, waitFor } from "./transport_helpers.js";
import { testSeed } from "../seed.js";

const SEED = testSeed("transport");
let rngState = SEED;
function rand(): number {
  // xorshift32: deterministic garbage for the fuzz-ish tests
  rngState ^= rngState << 13;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5;
  return (rngState >>> 0) / 2 ** 32;
}
function garbage(n: number): Buffer {
  const b = Buffer.alloc(n);
  for (let i = 0; i < n; i++) b[i] = Math.floor(rand() * 256);
  return b;
}

let nodes: Node[] = [];
async function cluster(n: number, opts: Parameters<typeof startNode>[1] = {}): Promise<Node[]> {
  const started: Node[] = [];
  for (let i = 1; i <= n; i++) started.push(await startNode(BigInt(i), opts));
  nodes.push(...started);
  connectAll(started);
  for (const a of started) for (const b of started) if (a !== b) await waitFor(() => a.transport.isActive(b.id), `stream ${a.id}->${b.id}`);
  return started;
}

afterEach(async () => {
  await Promise.all(nodes.map((n) => n.transport.stop()));
  nodes = [];
});

describe("transport over loopback", () => {
  it("three members exchange messages with every field intact and in order", async () => {
    const [a, b, c] = await cluster(3);
    const rich: Message = { ...msg(1n, 2n, 7), type: MessageType.MsgAppResp, reject: true, rejectHint: 2 ** 40, context: Buffer.from("ctx") };
    a!.transport.send([rich, msg(1n, 3n, 1), msg(1n, 2n, 8)]);
    b!.transport.send([msg(2n, 1n, 100), msg(2n, 3n, 200)]);
    c!.transport.send([{ ...msg(3n, 1n, 5), type: MessageType.MsgHeartbeat, entries: [] }]);
    await waitFor(() => b!.received.length === 2 && c!.received.length === 2 && a!.received.length === 2, "deliveries");
    expect(b!.received.map((m) => m.index)).toEqual([7, 8]);
    expect(b!.received[0]).toEqual({
      ...rich,
      context: new Uint8Array(Buffer.from("ctx")),
      entries: rich.entries.map((e) => ({ ...e, data: new Uint8Array(e.data) })),
    });
    expect(c!.received.map((m) => [m.from, m.index]).sort((x, y) => Number(x[0]!) - Number(y[0]!))).toEqual([[1n, 1], [2n, 200]]);
    expect(a!.received.map((m) => [m.from, m.type]).sort((x, y) => Number(x[0]!) - Number(y[0]!))).toEqual([[2n, MessageType.MsgApp], [3n, MessageType.MsgHeartbeat]]);
    expect(a!.lines.some((l) => l.msg === "peer became active" && l["remote-peer-id"] === "0000000000000002")).toBe(true);
  });

  it("writes everything queued in one event-loop turn as one flush of one frame", async () => {
    const [a, b] = await cluster(2);
    const before = a!.transport.peerStats(2n)!;
    const batch = Array.from({ length: 500 }, (_, i) => msg(1n, 2n, i));
    a!.transport.send(batch.slice(0, 250));
    a!.transport.send(batch.slice(250));
    await waitFor(() => b!.received.length === 500, "500 messages");
    const after = a!.transport.peerStats(2n)!;
    expect(after.flushes - before.flushes).toBe(1);
    expect(after.framesSent - before.framesSent).toBe(1);
    expect(after.messagesSent - before.messagesSent).toBe(500);
    expect(b!.received.map((m) => m.index)).toEqual(batch.map((m) => m.index));
  });

  it("splits a flush into several frames when the frame limit requires it", async () => {
    const [a, b] = await cluster(2, { limits: { maxFrameBytes: 64 * 1024 } });
    const before = a!.transport.peerStats(2n)!;
    const big = Array.from({ length: 10 }, (_, i) => msg(1n, 2n, i, { entries: [{ term: 1, index: i + 1, type: 0, data: Buffer.alloc(20_000, i) }] }));
    a!.transport.send(big);
    await waitFor(() => b!.received.length === 10, "10 large messages");
    const after = a!.transport.peerStats(2n)!;
    expect(after.flushes - before.flushes).toBe(1);
    expect(after.framesSent - before.framesSent).toBeGreaterThanOrEqual(4);
    expect(b!.received.map((m) => m.entries[0]!.data[0])).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("drops beyond the bounded queue and reports the peer unreachable", async () => {
    const [a, b] = await cluster(2, { limits: { maxQueueMessages: 10 } });
    a!.transport.send(Array.from({ length: 50 }, (_, i) => msg(1n, 2n, i)));
    await waitFor(() => b!.received.length === 10 && a!.unreachable.includes(2n), "10 delivered + unreachable");
    expect(a!.transport.peerStats(2n)!.messagesDropped).toBe(40);
    expect(a!.lines.some((l) => l.msg === "dropped internal Raft message since sending buffer is full (overloaded network)")).toBe(true);
    expect(b!.received.map((m) => m.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it("reconnects after the other side restarts on the same port", async () => {
    const [a, b] = await cluster(2);
    const port = Number(new URL(b!.url).port);
    await b!.transport.stop();
    nodes = nodes.filter((n) => n !== b);
    await waitFor(() => !a!.transport.isActive(2n), "stream down");
    expect(a!.unreachable).toContain(2n);
    a!.transport.send([msg(1n, 2n, 1)]); // dropped: the peer is down
    await waitFor(() => a!.transport.peerStats(2n)!.messagesDropped === 1, "drop while down");
    expect(a!.lines.some((l) => l.msg === "peer became inactive (message send to peer failed)")).toBe(true);

    const b2 = await startNode(2n, { port });
    nodes.push(b2);
    b2.transport.addPeer(1n, [a!.url]);
    await waitFor(() => a!.transport.isActive(2n) && b2.transport.isActive(1n), "streams back");
    a!.transport.send([msg(1n, 2n, 2)]);
    b2.transport.send([msg(2n, 1n, 3)]);
    await waitFor(() => b2.received.length === 1 && a!.received.length === 1, "traffic after restart");
    expect(b2.received[0]!.index).toBe(2);
    expect(a!.received[0]!.index).toBe(3);
  });

  it("redials a peer at once when the peer dials us, instead of waiting out its backoff (a restarted follower hears from the leader)", async () => {
    // A backoff far beyond waitFor's bound: only the redial can bring a's stream back in time.
    const a = await startNode(1n, { limits: { backoffInitialMs: 60_000, backoffMaxMs: 60_000 } });
    const b = await startNode(2n);
    nodes.push(a, b);
    connectAll([a, b]);
    await waitFor(() => a.transport.isActive(2n) && b.transport.isActive(1n), "streams up");
    const port = Number(new URL(b.url).port);
    await b.transport.stop();
    nodes = nodes.filter((n) => n !== b);
    await waitFor(() => !a.transport.isActive(2n), "stream down");
    const b2 = await startNode(2n, { port });
    nodes.push(b2);
    b2.transport.addPeer(1n, [a.url]);
    await waitFor(() => b2.transport.isActive(1n), "b2's stream to a");
    await waitFor(() => a.transport.isActive(2n), "a's stream to b2, redialed when b2's arrived");
    a.transport.send([msg(1n, 2n, 7)]);
    await waitFor(() => b2.received.length === 1, "a message from a after the redial");
    expect(b2.received[0]!.index).toBe(7);
  });

  it("refuses a peer of another cluster and logs the cluster ID mismatch", async () => {
    const a = await startNode(1n, { clusterId: 0xaaan });
    const x = await startNode(2n, { clusterId: 0xbbbn });
    nodes.push(a, x);
    connectAll([a, x]);
    await waitFor(() => a.lines.some((l) => l.msg === "request cluster ID mismatch"), "mismatch logged by listener");
    await waitFor(() => x.lines.some((l) => l.msg === "peer refused the connection" && l.error === "request cluster ID mismatch"), "refusal logged by dialer");
    const line = a.lines.find((l) => l.msg === "request cluster ID mismatch")!;
    expect(line["local-member-cluster-id"]).toBe("0000000000000aaa");
    expect(line["remote-peer-cluster-id"]).toBe("0000000000000bbb");
    expect(a.transport.isActive(2n)).toBe(false);
    expect(x.transport.isActive(1n)).toBe(false);
    x.transport.send([msg(2n, 1n, 1)]);
    await new Promise((r) => setTimeout(r, 50));
    expect(a.received).toHaveLength(0);
    // The refusal is logged once, not on every retry.
    expect(x.lines.filter((l) => l.msg === "peer refused the connection").length).toBe(1);
  });

  it("refuses a member it does not know", async () => {
    const a = await startNode(1n);
    const b = await startNode(2n);
    nodes.push(a, b);
    a.transport.addPeer(2n, [b.url]); // b never adds a
    await waitFor(() => b.lines.some((l) => l.msg === "failed to find remote peer in cluster"), "unknown peer refused");
    expect(a.transport.isActive(2n)).toBe(false);
  });

  it("transfers a large snapshot in chunks and reports success", async () => {
    const limits = { maxFrameBytes: 1024 * 1024, snapshotChunkBytes: 256 * 1024 };
    const [a, b] = await cluster(2, { limits });
    const data = randomBytes(5 * 1024 * 1024 + 123); // larger than a frame: only chunking can carry it
    const snap: Message = {
      ...msg(1n, 2n, 0),
      type: MessageType.MsgSnap,
      entries: [],
      snapshot: { data, metadata: { index: 1000, term: 4, confState: { voters: [1n, 2n], learners: [3n], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    };
    a!.transport.send([snap, msg(1n, 2n, 5)]);
    await waitFor(() => a!.snapshotStatus.length === 1, "snapshot status");
    expect(a!.snapshotStatus).toEqual([{ id: 2n, failed: false }]);
    const got = b!.received.find((m) => m.type === MessageType.MsgSnap)!;
    expect(got.snapshot!.metadata).toEqual(snap.snapshot!.metadata);
    expect(Buffer.compare(Buffer.from(got.snapshot!.data), data)).toBe(0);
    expect(b!.received.some((m) => m.type === MessageType.MsgApp && m.index === 5)).toBe(true);
  });

  it("reports a failed snapshot when the receiver refuses it", async () => {
    const [a, b] = await cluster(2, { limits: { maxSnapshotBytes: 1000 } });
    const snap: Message = {
      ...msg(1n, 2n, 0),
      type: MessageType.MsgSnap,
      entries: [],
      snapshot: { data: Buffer.alloc(900), metadata: { index: 10, term: 1, confState: { voters: [1n, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    };
    // The sender's own cap is the same, so make the receiver stricter by sending a bigger one from a lenient sender.
    const lenient = await startNode(3n, { limits: { maxSnapshotBytes: 10_000 } });
    nodes.push(lenient);
    lenient.transport.addPeer(2n, [b!.url]);
    b!.transport.addPeer(3n, [lenient.url]);
    await waitFor(() => lenient.transport.isActive(2n), "lenient stream");
    lenient.transport.send([{ ...snap, from: 3n, snapshot: { ...snap.snapshot!, data: Buffer.alloc(5000) } }]);
    await waitFor(() => lenient.snapshotStatus.length === 1, "failed status");
    expect(lenient.snapshotStatus).toEqual([{ id: 2n, failed: true }]);
    expect(lenient.unreachable).toContain(2n);
    expect(b!.received.filter((m) => m.type === MessageType.MsgSnap)).toHaveLength(0);
    expect(b!.lines.some((l) => l.msg === "failed to receive snapshot")).toBe(true);
    // A snapshot within the limit still goes through.
    a!.transport.send([snap]);
    await waitFor(() => a!.snapshotStatus.length === 1, "ok status");
    expect(a!.snapshotStatus).toEqual([{ id: 2n, failed: false }]);
  });

  it("survives garbage on the peer port and keeps serving", async () => {
    const [a, b] = await cluster(2, { limits: { handshakeTimeoutMs: 300 } });
    const port = Number(new URL(b!.url).port);
    const attempts: Buffer[] = [
      garbage(1),
      garbage(7),
      garbage(64),
      garbage(4096),
      Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
      // A well-formed frame that is not a Hello, and a Hello with a bad magic.
      (() => {
        const h = encodeHello({ version: PROTOCOL_VERSION, kind: ConnectionKind.Stream, clusterId: 0xc1n, from: 1n, to: 2n, clusterToken: "t" });
        h[9] ^= 0xff; // corrupted in flight: the CRC catches it
        return h;
      })(),
      (() => {
        const h = encodeHello({ version: PROTOCOL_VERSION, kind: ConnectionKind.Stream, clusterId: 0xc1n, from: 1n, to: 2n, clusterToken: "t" });
        const payload = Buffer.from(h.subarray(9));
        payload.write("HTTP", 0); // well framed, but not our protocol
        return encodeFrame(FrameKind.Hello, payload);
      })(),
      encodeFrame(FrameKind.Messages, Buffer.alloc(4)), // a valid frame, but not a Hello
      Buffer.concat([encodeHello({ version: PROTOCOL_VERSION + 1, kind: ConnectionKind.Stream, clusterId: 0xc1n, from: 1n, to: 2n, clusterToken: "t" })]),
    ];
    for (const bytes of attempts) {
      const closed = await new Promise<boolean>((resolve) => {
        const s = net.connect({ host: "127.0.0.1", port }, () => s.write(bytes));
        s.on("error", () => undefined);
        s.on("close", () => resolve(true));
        s.resume();
      });
      expect(closed).toBe(true);
    }
    const closes = b!.lines.filter((l) => l.msg === "closed peer connection").map((l) => String(l.reason));
    expect(closes.some((r) => r.includes("bad magic"))).toBe(true);
    expect(closes.some((r) => r.includes("checksum mismatch"))).toBe(true);
    expect(closes.some((r) => r.includes("expected Hello"))).toBe(true);
    expect(b!.lines.some((l) => typeof l.msg === "string" && l.msg.startsWith("incompatible peer protocol version"))).toBe(true);
    a!.transport.send([msg(1n, 2n, 42)]);
    await waitFor(() => b!.received.some((m) => m.index === 42), "traffic after garbage");
  });

  it("closes a stream whose peer stops reading and reports it unreachable", async () => {
    // A fake peer that completes the handshake and then never reads again.
    const sockets: net.Socket[] = [];
    const fake = net.createServer((s) => {
      sockets.push(s);
      s.once("data", () => {
        s.write(encodeHelloOk(2n));
        s.pause();
      });
    });
    await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r));
    try {
      const a = await startNode(1n, { limits: { streamStallTimeoutMs: 200 } });
      nodes.push(a);
      a.transport.addPeer(2n, [`http://127.0.0.1:${(fake.address() as net.AddressInfo).port}`]);
      await waitFor(() => a.transport.isActive(2n), "stream to the fake peer");
      const payload = Buffer.alloc(1024 * 1024);
      for (let round = 0; round < 64 && a.transport.isActive(2n); round++) {
        a.transport.send(Array.from({ length: 4 }, (_, i) => msg(1n, 2n, round * 4 + i, { entries: [{ term: 1, index: 1, type: 0, data: payload }] })));
        await new Promise((r) => setImmediate(r));
      }
      await waitFor(() => !a.transport.isActive(2n), "stalled stream closed");
      expect(a.unreachable).toContain(2n);
      expect(a.lines.some((l) => l.msg === "failed to connect to peer" && String(l.error).includes("stalled"))).toBe(true);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => fake.close(r));
    }
  });

  it("keeps its output buffer across flushes, and never rewrites one a backed-up socket still holds", async () => {
    // A fake peer that reads nothing for a while (the sender's socket backs up, so flushes find
    // it still holding their frames), then everything; every message must arrive intact, in order.
    const sockets: net.Socket[] = [];
    const received: Message[] = [];
    let corrupt: Error | undefined;
    const fake = net.createServer((s) => {
      sockets.push(s);
      const decoder = new FrameDecoder();
      let hello = true;
      s.on("data", (chunk: Buffer) => {
        let frames;
        try {
          frames = decoder.push(chunk);
        } catch (err) {
          corrupt = err as Error;
          s.destroy();
          return;
        }
        for (const f of frames) {
          if (hello) {
            hello = false;
            s.write(encodeHelloOk(2n));
            s.pause();
            setTimeout(() => s.resume(), 300);
            continue;
          }
          if (f.kind === FrameKind.Messages) received.push(...decodeMessages(f.payload));
        }
      });
    });
    await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r));
    try {
      const a = await startNode(1n, { limits: { streamStallTimeoutMs: 10_000, maxQueueBytes: 64 * 1024 * 1024, maxQueueMessages: 100_000 } });
      nodes.push(a);
      a.transport.addPeer(2n, [`http://127.0.0.1:${(fake.address() as net.AddressInfo).port}`]);
      await waitFor(() => a.transport.isActive(2n), "stream to the fake peer");
      // Rounds of ~96 KB (one flush each, under the kept buffer's 1 MiB), each entry filled with its index.
      let index = 0;
      for (let round = 0; round < 96; round++) {
        a.transport.send(Array.from({ length: 12 }, () => ++index).map((i) => msg(1n, 2n, i, { entries: [{ term: 1, index: i, type: 0, data: Buffer.alloc(8000, i % 251) }] })));
        await new Promise((r) => setImmediate(r));
      }
      const stats = a.transport.peerStats(2n)!;
      expect(stats.messagesDropped).toBe(0);
      await waitFor(() => received.length === index || corrupt !== undefined, `${index} messages`, 20_000);
      expect(corrupt).toBeUndefined();
      expect(received.map((m) => m.index)).toEqual(Array.from({ length: index }, (_, i) => i + 1));
      for (const m of received) expect(Buffer.from(m.entries[0]!.data).equals(Buffer.alloc(8000, m.index % 251)), `message ${m.index}`).toBe(true);
      expect(stats.flushes).toBeGreaterThan(1);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => fake.close(r));
    }
  });

  it("resets its stream to a peer it hears nothing from (etcd's ConnReadTimeout): inactive, ActiveSince cleared", async () => {
    // A fake peer that takes our stream and reads it, but never dials us back: from here it is silent.
    const sockets: net.Socket[] = [];
    const fake = net.createServer((s) => {
      sockets.push(s);
      s.once("data", () => s.write(encodeHelloOk(2n)));
    });
    await new Promise<void>((r) => fake.listen(0, "127.0.0.1", r));
    try {
      const a = await startNode(1n, { limits: { streamReadTimeoutMs: 150 } });
      nodes.push(a);
      a.transport.addPeer(2n, [`http://127.0.0.1:${(fake.address() as net.AddressInfo).port}`]);
      await waitFor(() => a.transport.isActive(2n), "stream to the fake peer");
      const firstSince = a.transport.activeSince(2n);
      expect(firstSince).toBeDefined();
      await waitFor(() => a.lines.some((l) => l.msg === "resetting stream to peer" && l["remote-peer-id"] === "0000000000000002"), "the silent peer's stream reset");
      // Reported once the reset socket has closed (an event after the log line: awaited, not assumed).
      await waitFor(() => a.unreachable.includes(2n), "the silent peer reported unreachable");
      // Each incarnation of the stream is reset in turn, and a reset clears ActiveSince: the peer
      // never keeps the first stream's start as its activity (checked by identity, not by clock).
      await waitFor(() => a.lines.filter((l) => l.msg === "resetting stream to peer").length >= 2, "the redialed stream reset again");
      expect(a.transport.activeSince(2n)).not.toBe(firstSince);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((r) => fake.close(r));
    }
  });

  it("keeps idle streams active with link heartbeats: peers with nothing to say are not reset", async () => {
    const [a, b] = await cluster(2, { limits: { streamReadTimeoutMs: 150 } });
    const since = a!.transport.activeSince(2n)!;
    // Several read timeouts with no Raft message either way.
    const until = Date.now() + 1_000;
    await waitFor(() => Date.now() > until, "a second of idle streams");
    for (const n of [a!, b!]) expect(n.lines.filter((l) => l.msg === "resetting stream to peer")).toEqual([]);
    expect(a!.transport.activeSince(2n)).toBe(since);
    expect(b!.transport.isActive(1n)).toBe(true);
  });

  it("bounds the memory of snapshots being received at once", async () => {
    const [a, b] = await cluster(2, { limits: { maxInboundSnapshotBytes: 1000 } });
    const snap: Message = {
      ...msg(1n, 2n, 0),
      type: MessageType.MsgSnap,
      entries: [],
      snapshot: { data: Buffer.alloc(1001), metadata: { index: 10, term: 1, confState: { voters: [1n, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    };
    a!.transport.send([snap]);
    await waitFor(() => a!.snapshotStatus.length === 1, "refused");
    expect(a!.snapshotStatus).toEqual([{ id: 2n, failed: true }]);
    // The reservation was returned: a snapshot within the budget passes afterwards, twice.
    for (let i = 0; i < 2; i++) {
      a!.transport.send([{ ...snap, snapshot: { ...snap.snapshot!, data: Buffer.alloc(1000) } }]);
      await waitFor(() => a!.snapshotStatus.length === 2 + i, "accepted");
    }
    expect(a!.snapshotStatus.slice(1)).toEqual([{ id: 2n, failed: false }, { id: 2n, failed: false }]);
    expect(b!.received.filter((m) => m.type === MessageType.MsgSnap)).toHaveLength(2);
  });

  it("fails over between a peer's URLs, for the stream and for snapshots", async () => {
    const a = await startNode(1n);
    const b = await startNode(2n);
    nodes.push(a, b);
    const closed = net.createServer();
    await new Promise<void>((r) => closed.listen(0, "127.0.0.1", r));
    const deadUrl = `http://127.0.0.1:${(closed.address() as net.AddressInfo).port}`;
    await new Promise((r) => closed.close(r)); // nothing listens there now
    a.transport.addPeer(2n, [deadUrl, b.url]);
    b.transport.addPeer(1n, [a.url]);
    await waitFor(() => a.transport.isActive(2n), "stream via the second URL");
    const snap: Message = {
      ...msg(1n, 2n, 0),
      type: MessageType.MsgSnap,
      entries: [],
      snapshot: { data: Buffer.alloc(10, 1), metadata: { index: 3, term: 1, confState: { voters: [1n, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } } },
    };
    a.transport.send([snap]);
    await waitFor(() => a.snapshotStatus.length === 1, "snapshot status");
    expect(a.snapshotStatus).toEqual([{ id: 2n, failed: false }]);
    // Moving the peer to an address that does not answer takes its stream down.
    a.transport.updatePeer(2n, [deadUrl]);
    await waitFor(() => !a.transport.isActive(2n), "stream down after update");
  });

  it("removePeer closes both directions; stop ends all callbacks", async () => {
    const [a, b] = await cluster(2);
    a!.transport.removePeer(2n);
    expect(a!.transport.peerIds()).toEqual([]);
    await waitFor(() => !b!.transport.isActive(1n), "b's stream to a closed");
    a!.transport.send([msg(1n, 2n, 1)]); // unknown target: ignored
    await b!.transport.stop();
    const count = b!.unreachable.length;
    await new Promise((r) => setTimeout(r, 50));
    expect(b!.unreachable.length).toBe(count);
  });

  it("rejects bad construction and self-sends loudly", async () => {
    const { logger } = captureLogger();
    const base = { clusterId: 1n, onMessage: () => undefined, onUnreachable: () => undefined, onSnapshotStatus: () => undefined, logger };
    expect(() => new Transport({ ...base, localId: 0n, listenUrls: [] })).toThrow(/invalid local member id/);
    expect(() => new Transport({ ...base, localId: 1n, listenUrls: ["unixs://127.0.0.1:1"] })).toThrow(/unsupported peer URL/);
    const t = new Transport({ ...base, localId: 1n, listenUrls: ["http://127.0.0.1:0"] });
    await t.start();
    expect(() => t.send([msg(1n, 1n, 0)])).toThrow(/local member/);
    expect(() => t.addPeer(1n, ["http://127.0.0.1:1"])).toThrow(/local member/);
    await t.stop();
  });
});
