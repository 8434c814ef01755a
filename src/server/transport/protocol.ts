/**
 * The peer protocol's frame payloads (framing itself is in frame.ts, messages in codec.ts).
 *
 * A connection starts with the dialer's Hello; the listener answers HelloOk or HelloReject and
 * closes. After HelloOk a "stream" connection carries Messages frames from dialer to listener; a
 * "snapshot" connection carries one SnapBegin, SnapChunk*, SnapEnd and gets one SnapAck back.
 * A "snapshot base" connection (issue 19) carries one SnapBaseRequest and gets one SnapBase back
 * (the receiver's backend: consistent index, revision, compaction), so the leader can send only
 * what changed since; a peer that predates it refuses the connection kind, and gets full images.
 * A "members" connection (etcd's GET /members on the peer port, used by a member joining with
 * --initial-cluster-state=existing, which knows no cluster or member id yet) gets one MembersInfo
 * instead of HelloOk, and is closed.
 * Each member dials its own connections to send, as etcd's rafthttp does (one stream per
 * direction), so a connection never needs to multiplex both directions of traffic.
 */
import type { Message, NodeId } from "../../raft/types.js";
import { formatId, parseId } from "../member.js";
import { CodecError, encodedMessageBytes, readMessage, Reader, Writer, writeMessage } from "./codec.js";
import type { SnapshotBase } from "../snapshot_delta_format.js";
import { allocFrame, type Frame, FrameKind, sealFrame } from "./frame.js";

/** "ETCT": guards against some other protocol talking to the peer port. */
export const PROTOCOL_MAGIC = 0x45544354;
/** Bumped on any incompatible change of this file, codec.ts or frame.ts. */
export const PROTOCOL_VERSION = 1;

export enum ConnectionKind {
  Stream = 1,
  Snapshot = 2,
  /** Answered with HelloOk and closed: the prober's round-trip measure (prober.ts). */
  Probe = 3,
  Members = 4,
  SnapshotBase = 5,
}

export interface Hello {
  version: number;
  kind: ConnectionKind;
  clusterId: NodeId;
  from: NodeId;
  to: NodeId;
  clusterToken: string;
}

/** Why a listener refused a connection (the message is etcd's wording for the case). */
export enum RejectReason {
  ClusterIdMismatch = 1,
  MemberIdMismatch = 2,
  UnknownPeer = 3,
  IncompatibleVersion = 4,
  Busy = 5,
  /** The dialer was removed from the cluster (etcd answers 410 Gone): it must stop. */
  MemberRemoved = 6,
}

export interface HelloReject {
  reason: RejectReason;
  message: string;
}

function stringBytes(s: string): Buffer {
  const b = Buffer.from(s, "utf8");
  if (b.byteLength > 0xffff) throw new CodecError("string too long");
  return b;
}

function frameWith(kind: FrameKind, payloadBytes: number, fill: (w: Writer) => void, into?: Buffer): Buffer {
  const { buf, payloadOffset } = allocFrame(kind, payloadBytes, into);
  const w = new Writer(buf);
  w.offset = payloadOffset;
  fill(w);
  if (w.offset !== buf.byteLength) throw new Error(`frame size mismatch: wrote ${w.offset}, sized ${buf.byteLength}`);
  return sealFrame(buf);
}

function writeString(w: Writer, b: Buffer): void {
  w.buf.writeUInt16BE(b.byteLength, w.offset);
  w.offset += 2;
  w.raw(b);
}

function readString(r: Reader): string {
  const n = r.u16();
  if (n > r.remaining()) throw new CodecError("truncated string");
  const s = r.buf.toString("utf8", r.offset, r.offset + n);
  r.offset += n;
  return s;
}

function expectEnd(r: Reader, what: string): void {
  if (r.remaining() !== 0) throw new CodecError(`${r.remaining()} trailing bytes in ${what}`);
}

export function encodeHello(h: Hello): Buffer {
  const token = stringBytes(h.clusterToken);
  return frameWith(FrameKind.Hello, 4 + 2 + 1 + 8 * 3 + 2 + token.byteLength, (w) => {
    w.u32(PROTOCOL_MAGIC);
    w.buf.writeUInt16BE(h.version, w.offset);
    w.offset += 2;
    w.u8(h.kind);
    w.id(h.clusterId);
    w.id(h.from);
    w.id(h.to);
    writeString(w, token);
  });
}

export function decodeHello(payload: Buffer): Hello {
  const r = new Reader(payload);
  if (r.u32() !== PROTOCOL_MAGIC) throw new CodecError("not an etcetera peer (bad magic)");
  const version = r.u16();
  const kind = r.u8();
  if (
    kind !== ConnectionKind.Stream &&
    kind !== ConnectionKind.Snapshot &&
    kind !== ConnectionKind.Probe &&
    kind !== ConnectionKind.Members &&
    kind !== ConnectionKind.SnapshotBase
  ) {
    throw new CodecError(`unknown connection kind ${kind}`);
  }
  const h: Hello = { version, kind, clusterId: r.id(), from: r.id(), to: r.id(), clusterToken: readString(r) };
  expectEnd(r, "hello");
  return h;
}

export function encodeHelloOk(localId: NodeId): Buffer {
  return frameWith(FrameKind.HelloOk, 8, (w) => w.id(localId));
}

export function decodeHelloOk(payload: Buffer): NodeId {
  const r = new Reader(payload);
  const id = r.id();
  expectEnd(r, "hello-ok");
  return id;
}

export function encodeHelloReject(reject: HelloReject): Buffer {
  const msg = stringBytes(reject.message);
  return frameWith(FrameKind.HelloReject, 1 + 2 + msg.byteLength, (w) => {
    w.u8(reject.reason);
    writeString(w, msg);
  });
}

export function decodeHelloReject(payload: Buffer): HelloReject {
  const r = new Reader(payload);
  const reject = { reason: r.u8() as RejectReason, message: readString(r) };
  expectEnd(r, "hello-reject");
  return reject;
}

/** A member as GET /members answers it (etcd's membership.Member JSON; ids as 16 hex digits in the JSON). */
export interface MembersInfoMember {
  id: NodeId;
  name: string;
  peerURLs: string[];
  clientURLs: string[];
  isLearner: boolean;
}

export interface MembersInfo {
  clusterId: NodeId;
  members: MembersInfoMember[];
}

export function encodeMembersInfo(info: MembersInfo): Buffer {
  const wire = { clusterId: formatId(info.clusterId), members: info.members.map((m) => ({ ...m, id: formatId(m.id) })) };
  const json = Buffer.from(JSON.stringify(wire), "utf8");
  return frameWith(FrameKind.MembersInfo, json.byteLength, (w) => w.raw(json));
}

export function decodeMembersInfo(payload: Buffer): MembersInfo {
  let o: unknown;
  try {
    o = JSON.parse(payload.toString("utf8"));
  } catch (e) {
    throw new CodecError(`members info is not JSON: ${(e as Error).message}`);
  }
  const info = o as { clusterId?: unknown; members?: unknown };
  const clusterId = wireId(info.clusterId);
  if (clusterId === undefined || !Array.isArray(info.members)) throw new CodecError("malformed members info");
  const members = (info.members as Array<Omit<MembersInfoMember, "id"> & { id: unknown }>).map((m) => {
    const id = wireId(m.id);
    if (id === undefined || !Array.isArray(m.peerURLs) || typeof m.isLearner !== "boolean") throw new CodecError("malformed member in members info");
    return { ...m, id };
  });
  return { clusterId, members };
}

/** Bytes of a Messages frame (header included) for messages whose encoded sizes sum to `bytes`. */
export function messagesFrameBytes(messagesBytes: number): number {
  return 8 + 1 + 4 + messagesBytes;
}

/**
 * One Messages frame carrying `msgs`; `sizes[i]` is encodedMessageBytes(msgs[i]). Written at the
 * start of `into` when given (a view of it returned), else into a buffer of its own.
 */
export function encodeMessages(msgs: readonly Message[], sizes?: readonly number[], into?: Buffer): Buffer {
  let total = 0;
  for (let i = 0; i < msgs.length; i++) total += sizes?.[i] ?? encodedMessageBytes(msgs[i]!);
  return frameWith(
    FrameKind.Messages,
    4 + total,
    (w) => {
      w.u32(msgs.length);
      for (const m of msgs) writeMessage(w, m);
    },
    into,
  );
}

export function decodeMessages(payload: Buffer): Message[] {
  const r = new Reader(payload);
  const n = r.count(1);
  const out = new Array<Message>(n);
  for (let i = 0; i < n; i++) out[i] = readMessage(r);
  expectEnd(r, "messages");
  return out;
}

/** The snapshot header: the MsgSnap with its data left out, and the data's total size. */
export function encodeSnapBegin(m: Message, totalBytes: number): Buffer {
  if (m.snapshot === undefined) throw new Error("MsgSnap without snapshot");
  const header: Message = { ...m, snapshot: { metadata: m.snapshot.metadata, data: new Uint8Array(0) } };
  return frameWith(FrameKind.SnapBegin, 8 + encodedMessageBytes(header), (w) => {
    w.u64(totalBytes);
    writeMessage(w, header);
  });
}

export function decodeSnapBegin(payload: Buffer): { message: Message; totalBytes: number } {
  const r = new Reader(payload);
  const totalBytes = r.u64();
  const message = readMessage(r);
  expectEnd(r, "snapshot header");
  if (message.snapshot === undefined) throw new CodecError("snapshot header without snapshot");
  return { message, totalBytes };
}

export function encodeSnapChunk(offset: number, data: Uint8Array): Buffer {
  return frameWith(FrameKind.SnapChunk, 8 + data.byteLength, (w) => {
    w.u64(offset);
    w.raw(data);
  });
}

/** The chunk's data is a view into the frame. */
export function decodeSnapChunk(payload: Buffer): { offset: number; data: Buffer } {
  const r = new Reader(payload);
  const offset = r.u64();
  return { offset, data: payload.subarray(r.offset) };
}

export function encodeSnapEnd(crc: number): Buffer {
  return frameWith(FrameKind.SnapEnd, 4, (w) => w.u32(crc));
}

export function decodeSnapEnd(payload: Buffer): number {
  const r = new Reader(payload);
  const crc = r.u32();
  expectEnd(r, "snapshot end");
  return crc;
}

export function encodeSnapAck(ok: boolean, message: string): Buffer {
  const msg = stringBytes(message);
  return frameWith(FrameKind.SnapAck, 1 + 2 + msg.byteLength, (w) => {
    w.u8(ok ? 1 : 0);
    writeString(w, msg);
  });
}

export function decodeSnapAck(payload: Buffer): { ok: boolean; message: string } {
  const r = new Reader(payload);
  const ack = { ok: r.bool(), message: readString(r) };
  expectEnd(r, "snapshot ack");
  return ack;
}

export function encodeSnapBaseRequest(): Buffer {
  return frameWith(FrameKind.SnapBaseRequest, 0, () => undefined);
}

/** The receiver's backend as a delta's base, or null when it offers none. */
export function encodeSnapBase(base: SnapshotBase | null): Buffer {
  const json = Buffer.from(JSON.stringify(base), "utf8");
  return frameWith(FrameKind.SnapBase, json.byteLength, (w) => w.raw(json));
}

export function decodeSnapBase(payload: Buffer): SnapshotBase | null {
  let o: unknown;
  try {
    o = JSON.parse(payload.toString("utf8"));
  } catch (e) {
    throw new CodecError(`snapshot base is not JSON: ${(e as Error).message}`);
  }
  if (o === null) return null;
  const b = o as Record<string, unknown>;
  for (const n of ["consistentIndex", "revision", "maxRev", "compactRevision"]) {
    if (!Number.isSafeInteger(b[n])) throw new CodecError(`malformed snapshot base: ${n}`);
  }
  return { consistentIndex: b.consistentIndex as number, revision: b.revision as number, maxRev: b.maxRev as number, compactRevision: b.compactRevision as number };
}

/** Throws unless `frame` is of `kind` (a peer speaking out of turn is a protocol error). */
export function expectKind(frame: Frame, kind: FrameKind): void {
  if (frame.kind !== kind) throw new CodecError(`expected frame ${FrameKind[kind]}, got ${FrameKind[frame.kind]}`);
}

/** An id of the members JSON: 16 hex digits, or a number from a member that predates exact ids. */
function wireId(v: unknown): NodeId | undefined {
  if (typeof v === "number" && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
  if (typeof v !== "string") return undefined;
  try {
    return parseId(v);
  } catch {
    return undefined;
  }
}
