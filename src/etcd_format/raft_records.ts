/**
 * The raftpb and etcdserverpb messages etcd 3.4 keeps in its WAL and `.snap` files, decoded with
 * every id as an exact uint64 (bigint): raftpb.Entry, HardState, ConfState, SnapshotMetadata,
 * Snapshot, ConfChange, and etcdserverpb.Metadata (the WAL's member and cluster ids). Indexes and
 * terms are numbers, range-checked. gogoproto writes repeated uint64 unpacked; packed is read too.
 */
import { asSafeNumber, expectBytes, expectVarint, packedVarints, ProtoFieldError, protoFields, type ProtoField } from "./proto_fields.js";

const EMPTY: Uint8Array = new Uint8Array(0);

/** raftpb.EntryType. */
export const ETCD_ENTRY_NORMAL = 0;
export const ETCD_ENTRY_CONF_CHANGE = 1;
export const ETCD_ENTRY_CONF_CHANGE_V2 = 2;

export interface EtcdEntry {
  readonly term: number;
  readonly index: number;
  readonly type: number;
  readonly data: Uint8Array;
}

export interface EtcdHardState {
  readonly term: number;
  readonly vote: bigint;
  readonly commit: number;
}

export interface EtcdConfState {
  readonly voters: readonly bigint[];
  readonly learners: readonly bigint[];
  readonly votersOutgoing: readonly bigint[];
  readonly learnersNext: readonly bigint[];
  readonly autoLeave: boolean;
}

export interface EtcdSnapshotMetadata {
  readonly confState: EtcdConfState;
  readonly index: number;
  readonly term: number;
}

export interface EtcdRaftSnapshot {
  readonly data: Uint8Array;
  readonly metadata: EtcdSnapshotMetadata;
}

/** etcdserverpb.Metadata, the WAL's metadata record. */
export interface EtcdWalMetadata {
  readonly nodeId: bigint;
  readonly clusterId: bigint;
}

/** raftpb.ConfChangeType. */
export const ETCD_CONF_ADD_NODE = 0;
export const ETCD_CONF_REMOVE_NODE = 1;
export const ETCD_CONF_UPDATE_NODE = 2;
export const ETCD_CONF_ADD_LEARNER_NODE = 3;

export interface EtcdConfChange {
  readonly id: bigint;
  readonly type: number;
  readonly nodeId: bigint;
  readonly context: Uint8Array;
}

/** walpb.Snapshot: a snapshot marker in the WAL. */
export interface EtcdWalSnapshot {
  readonly index: number;
  readonly term: number;
}

/** etcd 3.4 writes no other fields: one is damage (a record whose type byte flipped decodes as another message). */
function unknown(f: ProtoField, message: string): never {
  throw new ProtoFieldError(`${message} has no field ${f.field}`);
}

function num(f: ProtoField, what: string): number {
  return asSafeNumber(expectVarint(f, what), what);
}

/** A repeated uint64, unpacked (one varint per element) or packed (one length-delimited run). */
function pushIds(out: bigint[], f: ProtoField, what: string): void {
  if (f.wire === 0) out.push(f.varint);
  else for (const id of packedVarints(expectBytes(f, what), what)) out.push(id);
}

export function decodeEtcdEntry(buf: Uint8Array): EtcdEntry {
  let term = 0;
  let index = 0;
  let type = 0;
  let data = EMPTY;
  for (const f of protoFields(buf)) {
    if (f.field === 1) type = num(f, "Entry.Type");
    else if (f.field === 2) term = num(f, "Entry.Term");
    else if (f.field === 3) index = num(f, "Entry.Index");
    else if (f.field === 4) data = expectBytes(f, "Entry.Data");
    else unknown(f, "raftpb.Entry");
  }
  if (index === 0) throw new ProtoFieldError("Entry.Index 0");
  // Raft's terms start at 1 (its bootstrap entries are term 1); only the dummy entry at index 0 has term 0.
  if (term === 0) throw new ProtoFieldError(`Entry ${index} at term 0`);
  if (type !== ETCD_ENTRY_NORMAL && type !== ETCD_ENTRY_CONF_CHANGE && type !== ETCD_ENTRY_CONF_CHANGE_V2) throw new ProtoFieldError(`Entry.Type ${type} unknown`);
  return { term, index, type, data };
}

export function decodeEtcdHardState(buf: Uint8Array): EtcdHardState {
  let term = 0;
  let vote = 0n;
  let commit = 0;
  for (const f of protoFields(buf)) {
    if (f.field === 1) term = num(f, "HardState.Term");
    else if (f.field === 2) vote = expectVarint(f, "HardState.Vote");
    else if (f.field === 3) commit = num(f, "HardState.Commit");
    else unknown(f, "raftpb.HardState");
  }
  if (commit > 0 && term === 0) throw new ProtoFieldError(`HardState commit ${commit} at term 0`);
  return { term, vote, commit };
}

export function decodeEtcdConfState(buf: Uint8Array): EtcdConfState {
  const voters: bigint[] = [];
  const learners: bigint[] = [];
  const votersOutgoing: bigint[] = [];
  const learnersNext: bigint[] = [];
  let autoLeave = false;
  for (const f of protoFields(buf)) {
    if (f.field === 1) pushIds(voters, f, "ConfState.voters");
    else if (f.field === 2) pushIds(learners, f, "ConfState.learners");
    else if (f.field === 3) pushIds(votersOutgoing, f, "ConfState.voters_outgoing");
    else if (f.field === 4) pushIds(learnersNext, f, "ConfState.learners_next");
    else if (f.field === 5) autoLeave = expectVarint(f, "ConfState.auto_leave") !== 0n;
  }
  return { voters, learners, votersOutgoing, learnersNext, autoLeave };
}

export function decodeEtcdRaftSnapshot(buf: Uint8Array): EtcdRaftSnapshot {
  let data = EMPTY;
  let metadata: EtcdSnapshotMetadata | undefined;
  for (const f of protoFields(buf)) {
    if (f.field === 1) data = expectBytes(f, "Snapshot.data");
    else if (f.field === 2) {
      let confState: EtcdConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
      let index = 0;
      let term = 0;
      for (const m of protoFields(expectBytes(f, "Snapshot.metadata"))) {
        if (m.field === 1) confState = decodeEtcdConfState(expectBytes(m, "SnapshotMetadata.conf_state"));
        else if (m.field === 2) index = num(m, "SnapshotMetadata.index");
        else if (m.field === 3) term = num(m, "SnapshotMetadata.term");
      }
      metadata = { confState, index, term };
    }
  }
  if (metadata === undefined) throw new ProtoFieldError("Snapshot without metadata");
  return { data, metadata };
}

export function decodeEtcdWalMetadata(buf: Uint8Array): EtcdWalMetadata {
  let nodeId = 0n;
  let clusterId = 0n;
  for (const f of protoFields(buf)) {
    if (f.field === 1) nodeId = expectVarint(f, "Metadata.NodeID");
    else if (f.field === 2) clusterId = expectVarint(f, "Metadata.ClusterID");
    else unknown(f, "etcdserverpb.Metadata");
  }
  if (nodeId === 0n) throw new ProtoFieldError("Metadata.NodeID is 0");
  return { nodeId, clusterId };
}

export function decodeEtcdWalSnapshot(buf: Uint8Array): EtcdWalSnapshot {
  let index = 0;
  let term = 0;
  for (const f of protoFields(buf)) {
    if (f.field === 1) index = num(f, "walpb.Snapshot.index");
    else if (f.field === 2) term = num(f, "walpb.Snapshot.term");
    else unknown(f, "walpb.Snapshot");
  }
  return { index, term };
}

export function decodeEtcdConfChange(buf: Uint8Array): EtcdConfChange {
  let id = 0n;
  let type = 0;
  let nodeId = 0n;
  let context = EMPTY;
  for (const f of protoFields(buf)) {
    if (f.field === 1) id = expectVarint(f, "ConfChange.ID");
    else if (f.field === 2) type = num(f, "ConfChange.Type");
    else if (f.field === 3) nodeId = expectVarint(f, "ConfChange.NodeID");
    else if (f.field === 4) context = expectBytes(f, "ConfChange.Context");
  }
  if (type < ETCD_CONF_ADD_NODE || type > ETCD_CONF_ADD_LEARNER_NODE) throw new ProtoFieldError(`ConfChange.Type ${type} unknown`);
  return { id, type, nodeId, context };
}
