/**
 * The cluster's membership as the apply loop sees it (etcd's membership.RaftCluster): members by
 * id, persisted in the backend's `members` table in the same SQLite transaction as the data the
 * entry that changed them covers, so a restart sees exactly the membership of its applied index.
 */
import type { Database, Statement } from "better-sqlite3";
import type { NodeId } from "../raft/types.js";
import type { Member } from "./member.js";

interface MemberRow {
  id: number;
  value: Buffer;
}

export class Membership {
  private readonly members = new Map<NodeId, Member>();
  private readonly removed = new Set<NodeId>();
  private readonly upsertStmt: Statement;
  private readonly deleteStmt: Statement;
  private readonly removedStmt: Statement;

  constructor(
    db: Database,
    readonly clusterId: number,
  ) {
    this.upsertStmt = db.prepare("INSERT OR REPLACE INTO members (id, value) VALUES (?, ?)");
    this.deleteStmt = db.prepare("DELETE FROM members WHERE id = ?");
    this.removedStmt = db.prepare("INSERT OR IGNORE INTO members_removed (id) VALUES (?)");
    for (const row of db.prepare("SELECT id, value FROM members").all() as MemberRow[]) {
      this.members.set(row.id, decodeMember(row.id, row.value));
    }
    for (const row of db.prepare("SELECT id FROM members_removed").all() as Array<{ id: number }>) {
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

function decodeMember(id: number, value: Buffer): Member {
  const o = JSON.parse(value.toString()) as {
    name: string;
    peerUrls: string[];
    clientUrls: string[];
    isLearner: boolean;
  };
  return { id, name: o.name, peerUrls: o.peerUrls, clientUrls: o.clientUrls, isLearner: o.isLearner };
}
