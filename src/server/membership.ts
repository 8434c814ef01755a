/**
 * The cluster's membership as the apply loop sees it (etcd's membership.RaftCluster): members by
 * id, persisted in the backend's `members` table in the same SQLite transaction as the data the
 * entry that changed them covers, so a restart sees exactly the membership of its applied index.
 * A snapshot restore reloads it from the new file (etcd's cluster.Recover).
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS members (id INTEGER PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS members_removed (id INTEGER PRIMARY KEY);
`;
import type { Backend } from "../backend/backend.js";
import type { BatchTx, WriteStatement } from "../backend/batch_tx.js";
import type { NodeId } from "../raft/types.js";
import type { Member } from "./member.js";

interface MemberRow {
  id: number;
  value: Buffer;
}

export class Membership {
  private readonly members = new Map<NodeId, Member>();
  private readonly removed = new Set<NodeId>();
  private upsertStmt!: WriteStatement<[number, Buffer]>;
  private deleteStmt!: WriteStatement<[number]>;
  private removedStmt!: WriteStatement<[number]>;

  constructor(
    backend: Backend,
    readonly clusterId: number,
  ) {
    backend.register({ name: "membership", schema: SCHEMA, recover: (tx) => this.recover(tx) });
  }

  private recover(tx: BatchTx): void {
    this.upsertStmt = tx.write("INSERT OR REPLACE INTO members (id, value) VALUES (?, ?)");
    this.deleteStmt = tx.write("DELETE FROM members WHERE id = ?");
    this.removedStmt = tx.write("INSERT OR IGNORE INTO members_removed (id) VALUES (?)");
    this.members.clear();
    this.removed.clear();
    for (const row of tx.read<[], MemberRow>("SELECT id, value FROM members").all()) {
      this.members.set(row.id, decodeMember(row.id, row.value));
    }
    for (const row of tx.read<[], { id: number }>("SELECT id FROM members_removed").all()) {
      this.removed.add(row.id);
    }
  }

  get size(): number {
    return this.members.size;
  }

  list(): Member[] {
    return [...this.members.values()].sort((a, b) => a.id - b.id);
  }

  get(id: NodeId): Member | undefined {
    return this.members.get(id);
  }

  isRemoved(id: NodeId): boolean {
    return this.removed.has(id);
  }

  /** Adds or replaces a member (a conf change being applied, or bootstrap). */
  add(m: Member): void {
    if (this.removed.has(m.id)) throw new Error(`membership: member ${m.id} was removed and cannot be re-added`);
    this.members.set(m.id, m);
    this.upsertStmt.run(m.id, encodeMember(m));
  }

  remove(id: NodeId): void {
    this.members.delete(id);
    this.removed.add(id);
    this.deleteStmt.run(id);
    this.removedStmt.run(id);
  }

  /** A started member's published name and client URLs (etcd's ClusterMemberAttrSet). */
  setAttributes(id: NodeId, name: string, clientUrls: readonly string[]): boolean {
    const m = this.members.get(id);
    if (m === undefined) return false;
    this.add({ ...m, name, clientUrls: [...clientUrls] });
    return true;
  }

  promote(id: NodeId): void {
    const m = this.members.get(id);
    if (m === undefined) throw new Error(`membership: promote of unknown member ${id}`);
    this.add({ ...m, isLearner: false });
  }
}

function encodeMember(m: Member): Buffer {
  return Buffer.from(
    JSON.stringify({ name: m.name, peerUrls: m.peerUrls, clientUrls: m.clientUrls, isLearner: m.isLearner }),
  );
}

export function decodeMember(id: number, value: Buffer): Member {
  const o = JSON.parse(value.toString()) as {
    name: string;
    peerUrls: string[];
    clientUrls: string[];
    isLearner: boolean;
  };
  return { id, name: o.name, peerUrls: o.peerUrls, clientUrls: o.clientUrls, isLearner: o.isLearner };
}
