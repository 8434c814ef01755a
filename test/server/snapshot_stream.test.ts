/**
 * Streaming snapshots between two transports over loopback, disk to disk, as members do: the
 * sender reads a file body chunk by chunk, the receiver writes a temporary file through
 * Snapshots.receive and stages it by rename. Checked: memory stays a few chunks for a 200 MiB
 * image (live heap and buffers after forced GCs, sampled during the transfer), a chunk that does
 * not match the checksum is refused, a frame corrupted in flight closes the connection, and a
 * transfer cut at any byte (seeded) delivers nothing and leaves no file, while the next one
 * succeeds.
 */
import { createHash } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { open } from "node:fs/promises";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { Backend } from "../../src/backend/backend.js";
import { type Message, MessageType } from "../../src/raft/types.js";
import { Snapshots } from "../../src/server/snapshots.js";
import { FrameDecoder, FrameKind } from "../../src/server/transport/frame.js";
import {
  ConnectionKind,
  decodeSnapAck,
  encodeHello,
  encodeSnapBegin,
  encodeSnapChunk,
  encodeSnapEnd,
  PROTOCOL_VERSION,
} from "../../src/server/transport/protocol.js";
import { fileSnapshotBody } from "../../src/server/transport/snapshot_body.js";
import { crc32 } from "node:zlib";
import { testSeed } from "../seed.js";
import { connectAll, type Node, startNode, waitFor } from "./transport_helpers.js";

const SEED = testSeed("snapshot stream");
let rngState = SEED >>> 0 || 1;
function rand(): number {
  rngState ^= rngState << 13;
  rngState ^= rngState >>> 17;
  rngState ^= rngState << 5;
  return (rngState >>> 0) / 2 ** 32;
}

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc") as () => void;

const CHUNK = 1024 * 1024;
const META = { index: 1000, term: 4, confState: { voters: [1n, 2n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false } };
const SNAP: Message = {
  type: MessageType.MsgSnap,
  to: 2n,
  from: 1n,
  term: 4,
  logTerm: 0,
  index: 0,
  commit: 0,
  reject: false,
  rejectHint: 0,
  entries: [],
  context: new Uint8Array(0),
  snapshot: { metadata: META, data: new Uint8Array(0) },
};

let dir: string;
let backend: Backend;
let snapshots: Snapshots;
let snapDir: string;
let nodes: Node[] = [];

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "snapstream-"));
  snapDir = join(dir, "snap");
  mkdirSync(snapDir);
  backend = Backend.open(join(snapDir, "db"));
  snapshots = new Snapshots({ backend, snapDir, storage: { snapshotAt: async () => ({ metadata: META, data: new Uint8Array(0) }) }, consistentIndex: () => 0, logger: pino({ level: "silent" }) });
});
afterAll(() => {
  backend.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(async () => {
  await Promise.all(nodes.map((n) => n.transport.stop()));
  nodes = [];
});

async function pair(): Promise<[Node, Node]> {
  const a = await startNode(1n);
  const b = await startNode(2n, { snapshotSink: (from, m, total) => snapshots.receive(from, m, total) });
  nodes.push(a, b);
  connectAll([a, b]);
  await waitFor(() => a.transport.isActive(2n) && b.transport.isActive(1n), "streams");
  return [a, b];
}

/** Files of receptions in progress or left behind (none may outlive a failed transfer). */
function incomingFiles(): string[] {
  return readdirSync(snapDir).filter((f) => f.startsWith("incoming-"));
}

async function sha256(path: string): Promise<string> {
  const h = createHash("sha256");
  for await (const c of createReadStream(path)) h.update(c as Buffer);
  return h.digest("hex");
}

/** Writes `bytes` of seeded data in 1 MiB pieces (never the whole in memory). */
async function writeImage(path: string, bytes: number): Promise<void> {
  const fh = await open(path, "w");
  const piece = Buffer.allocUnsafe(CHUNK);
  for (let off = 0; off < bytes; off += CHUNK) {
    for (let i = 0; i < piece.length; i += 4) piece.writeUInt32LE((rand() * 2 ** 32) >>> 0, i);
    await fh.write(piece, 0, Math.min(CHUNK, bytes - off), off);
  }
  await fh.close();
}

/** Live memory: V8 heap plus ArrayBuffers (Buffers), after full collections. */
function liveBytes(): number {
  gc();
  gc();
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

/** Opens a snapshot connection to `port` as member 1 and resolves with the connection once the Hello is accepted. */
async function dialSnapshot(port: number): Promise<{ socket: net.Socket; frames: FrameKind[]; acks: { ok: boolean; message: string }[]; closed: Promise<void> }> {
  const socket = net.connect({ host: "127.0.0.1", port });
  socket.on("error", () => undefined);
  const decoder = new FrameDecoder();
  const frames: FrameKind[] = [];
  const acks: { ok: boolean; message: string }[] = [];
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.on("data", (c: Buffer) => {
    for (const f of decoder.push(c)) {
      frames.push(f.kind);
      if (f.kind === FrameKind.SnapAck) acks.push(decodeSnapAck(f.payload));
    }
  });
  socket.write(encodeHello({ version: PROTOCOL_VERSION, kind: ConnectionKind.Snapshot, clusterId: 0xc1n, from: 1n, to: 2n, clusterToken: "test-cluster" }));
  await waitFor(() => frames.includes(FrameKind.HelloOk), "hello ok");
  return { socket, frames, acks, closed };
}

/** The bytes of a whole transfer of `data` after the Hello. */
function transferBytes(data: Buffer, chunk = 256 * 1024): Buffer[] {
  const parts = [encodeSnapBegin(SNAP, data.byteLength)];
  for (let off = 0; off < data.byteLength; off += chunk) parts.push(encodeSnapChunk(off, data.subarray(off, Math.min(off + chunk, data.byteLength))));
  parts.push(encodeSnapEnd(crc32(data)));
  return parts;
}

describe("streaming snapshots, disk to disk", () => {
  it("streams a 200 MiB image with the memory of both ends bounded by a few chunks", { timeout: 120_000 }, async () => {
    const [a, b] = await pair();
    const source = join(dir, "image-200.db");
    const size = 200 * 1024 * 1024 + 12_345;
    await writeImage(source, size);
    const want = await sha256(source);
    const baseline = liveBytes();
    let peak = baseline;
    let released = false;
    const sampler = setInterval(() => {
      peak = Math.max(peak, liveBytes());
    }, 25);
    try {
      a.transport.sendSnapshot(SNAP, await fileSnapshotBody(source, async () => void (released = true)));
      await waitFor(() => a.snapshotStatus.length === 1, "snapshot status", 100_000);
    } finally {
      clearInterval(sampler);
    }
    peak = Math.max(peak, liveBytes());
    expect(a.snapshotStatus).toEqual([{ id: 2n, failed: false }]);
    expect(released, "the sender's body is released").toBe(true);
    const growthMiB = (peak - baseline) / 2 ** 20;
    console.log(`[snapshot stream] ${(size / 2 ** 20).toFixed(0)} MiB streamed; live memory grew at most ${growthMiB.toFixed(1)} MiB (chunk ${CHUNK / 2 ** 20} MiB)`);
    expect(growthMiB, "live heap + buffers growth during the transfer, MiB").toBeLessThan(16);
    // Raft gets the metadata and a reference to the file, never the data.
    expect(b.received.length).toBe(1);
    const got = b.received[0]!;
    expect(got.snapshot!.metadata).toEqual(META);
    expect(got.snapshot!.data.byteLength).toBeLessThan(100);
    const staged = await snapshots.stage(got.snapshot!);
    expect(staged.data.byteLength).toBe(0);
    const path = join(snapDir, `${META.index.toString(16).padStart(16, "0")}.snap.db`);
    expect(await sha256(path)).toBe(want);
    expect(incomingFiles()).toEqual([]);
    rmSync(path);
    rmSync(source);
    expect(b.lines.some((l) => l.msg === "received and delivered incoming snapshot" && l["snapshot-size-bytes"] === size && typeof l["took-seconds"] === "number")).toBe(true);
  });

  it("refuses a snapshot whose data does not match its checksum and keeps no file", async () => {
    const [, b] = await pair();
    const data = Buffer.alloc(3 * 256 * 1024 + 7, 0x5a);
    const parts = transferBytes(data);
    // A chunk whose bytes changed before framing: every frame is sound, the whole-data CRC is not.
    const bad = Buffer.from(data.subarray(256 * 1024, 512 * 1024));
    bad[1000] ^= 0x01;
    parts[2] = encodeSnapChunk(256 * 1024, bad);
    const conn = await dialSnapshot(b.transport.listenAddresses()[0]!.port);
    for (const p of parts) conn.socket.write(p);
    await waitFor(() => conn.acks.length === 1, "ack");
    expect(conn.acks[0]!.ok).toBe(false);
    expect(conn.acks[0]!.message).toContain("checksum mismatch");
    await waitFor(() => incomingFiles().length === 0, "partial file removed");
    expect(b.received).toEqual([]);
    expect(b.lines.some((l) => l.msg === "failed to receive snapshot")).toBe(true);
  });

  it("closes the connection on a chunk corrupted in flight and keeps no file", async () => {
    const [, b] = await pair();
    const data = Buffer.alloc(4 * 256 * 1024, 0x33);
    const parts = transferBytes(data);
    const flipped = Buffer.from(parts[3]!);
    flipped[flipped.length - 10] ^= 0x80; // after framing: the frame's CRC no longer matches
    parts[3] = flipped;
    const conn = await dialSnapshot(b.transport.listenAddresses()[0]!.port);
    for (const p of parts) conn.socket.write(p);
    await conn.closed;
    expect(conn.acks).toEqual([]);
    await waitFor(() => incomingFiles().length === 0, "partial file removed");
    expect(b.received).toEqual([]);
  });

  it("a transfer cut at random points delivers nothing and leaves no file; the next one goes through", { timeout: 60_000 }, async () => {
    const [, b] = await pair();
    const data = Buffer.alloc(6 * 256 * 1024 + 99);
    for (let i = 0; i < data.length; i++) data[i] = i * 7;
    const whole = Buffer.concat(transferBytes(data));
    const port = b.transport.listenAddresses()[0]!.port;
    const cuts = Array.from({ length: 12 }, () => 1 + Math.floor(rand() * (whole.length - 1)));
    console.log(`[snapshot stream] seed=${SEED}: cuts at ${cuts.join(", ")} of ${whole.length} bytes`);
    for (const [i, cut] of cuts.entries()) {
      const conn = await dialSnapshot(port);
      await new Promise<void>((resolve) => conn.socket.write(whole.subarray(0, cut), () => resolve()));
      // Alternate a reset (RST) and an orderly close of the sender's side.
      if (i % 2 === 0) conn.socket.resetAndDestroy();
      else conn.socket.end();
      await conn.closed;
      await waitFor(() => incomingFiles().length === 0, `no file after the cut at ${cut}`);
      expect(b.received, `cut at ${cut}`).toEqual([]);
    }
    const conn = await dialSnapshot(port);
    conn.socket.write(whole);
    await waitFor(() => conn.acks.length === 1, "ack");
    expect(conn.acks[0]).toEqual({ ok: true, message: "" });
    expect(b.received.length).toBe(1);
    await snapshots.stage(b.received[0]!.snapshot!);
    const path = join(snapDir, `${META.index.toString(16).padStart(16, "0")}.snap.db`);
    expect(existsSync(path)).toBe(true);
    expect(crc32(readFileSync(path))).toBe(crc32(data));
    rmSync(path);
  });

  it("a receiver that goes away mid-transfer fails the send and releases the sender's file", { timeout: 60_000 }, async () => {
    const [a, b] = await pair();
    const source = join(dir, "image-cut.db");
    await writeImage(source, 64 * 1024 * 1024);
    let released = false;
    a.transport.sendSnapshot(SNAP, await fileSnapshotBody(source, async () => void (released = true)));
    await waitFor(() => incomingFiles().length === 1, "reception started");
    await b.transport.stop();
    await waitFor(() => a.snapshotStatus.length === 1, "failed status", 40_000);
    expect(a.snapshotStatus).toEqual([{ id: 2n, failed: true }]);
    expect(released).toBe(true);
    await waitFor(() => incomingFiles().length === 0, "partial file removed");
    expect(b.received).toEqual([]);
    rmSync(source);
  });

  it("a member starting removes temporary images and staged images its backend already holds, and keeps the one it needs", async () => {
    const dir2 = mkdtempSync(join(tmpdir(), "snapstream-start-"));
    const be = Backend.open(join(dir2, "db"));
    try {
      const staged = (index: number) => join(dir2, `${index.toString(16).padStart(16, "0")}.snap.db`);
      const files = ["incoming-0a1b.db.tmp", "outgoing-2-77-0.db.tmp", `${"0".repeat(15)}9.snap.db.tmp`].map((f) => join(dir2, f));
      for (const f of [...files, staged(5), staged(9), staged(12)]) writeFileSync(f, "x");
      const s = new Snapshots({ backend: be, snapDir: dir2, storage: { snapshotAt: async () => ({ metadata: META, data: new Uint8Array(0) }) }, consistentIndex: () => 9, logger: pino({ level: "silent" }) });
      expect(files.filter((f) => existsSync(f)), "temporary files left").toEqual([]);
      await s.recoverAtStart({ metadata: { ...META, index: 9 }, data: new Uint8Array(0) });
      expect([5, 9, 12].filter((i) => existsSync(staged(i))), "staged images left (the backend holds index 9)").toEqual([12]);
    } finally {
      be.close();
      rmSync(dir2, { recursive: true, force: true });
    }
  });
});
