/**
 * etcetera's own member directory (snap/db, a `.snap` at the consistent index, a WAL with the
 * snapshot marker and hard state) written from an etcd 3.4 backend: the last step of importing
 * etcd's data dir (etcd_import.ts) and all of `snapshot restore` (src/snapshot_cli.ts), which
 * differ only in where the membership, ids and raft state come from.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { ConfState, Entry, HardState, NodeId, Snapshot } from "../../raft/types.js";
import { Snapshotter, WAL } from "../../wal/index.js";
import { fsyncDir } from "../../wal/segment.js";
import { importBackend, type BackendContent, type BackendImportResult } from "./backend_import.js";

export interface MemberDirOptions extends BackendContent {
  /** The member directory to fill (holds snap/ and wal/ afterwards). */
  readonly dir: string;
  readonly memberId: NodeId;
  readonly clusterId: NodeId;
  readonly hardState: HardState;
  /** Entries after the consistent index, for the applier. */
  readonly tail: Entry[];
}

export async function writeMemberDir(o: MemberDirOptions): Promise<BackendImportResult> {
  const ci = o.consistentIndex;
  const confState: ConfState = {
    voters: o.members.filter((m) => !m.isLearner).map((m) => m.id),
    learners: o.members.filter((m) => m.isLearner).map((m) => m.id),
    votersOutgoing: [],
    learnersNext: [],
    autoLeave: false,
  };
  mkdirSync(join(o.dir, "snap"), { recursive: true });
  const imported = importBackend({
    source: o.source,
    path: join(o.dir, "snap", "db"),
    members: o.members,
    removedMemberIds: o.removedMemberIds,
    consistentIndex: ci,
    term: o.term,
    progress: o.progress,
  });
  const snapshot: Snapshot = { data: new Uint8Array(0), metadata: { index: ci, term: o.term, confState } };
  await new Snapshotter(join(o.dir, "snap")).save(snapshot);
  const wal = await WAL.create(join(o.dir, "wal"), { memberId: o.memberId, clusterId: o.clusterId });
  try {
    await wal.saveSnapshotMarker({ index: ci, term: o.term, confState });
    await wal.save(o.hardState, o.tail);
  } finally {
    await wal.close();
  }
  await fsyncDir(join(o.dir, "snap"));
  await fsyncDir(o.dir);
  return imported;
}
