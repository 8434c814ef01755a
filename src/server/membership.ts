/**
 * The cluster's membership as the apply loop sees it (etcd's membership.RaftCluster): members by
 * id, persisted in the backend's `members` table in the same SQLite transaction as the data the
 * entry that changed them covers, so a restart sees exactly the membership of its applied index.
 * A snapshot restore reloads it from the new file (etcd's cluster.Recover).
 */

export const MEMBERSHIP_SCHEMA = `
CREATE TABLE IF NOT EXISTS members (id INTEGER PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS members_removed (id INTEGER PRIMARY KEY);
CREATE TABLE IF NOT EXISTS conf_changes_refused (raft_index INTEGER PRIMARY KEY);
`;

/** etcd 3.4's maxLearners: at most one learner in the cluster. */
export const MAX_LEARNERS = 1;
import type { Backend } from "../backend/backend.js";
import type { BatchTx, WriteStatement } from "../backend/batch_tx.js";
import type { NodeId } from "../raft/types.js";
import { compareNodeIds, ConfChangeType } from "../raft/types.js";
import type { ConfChangeContext } from "./conf_change_context.js";
import { Errors } from "./errors.js";
import type { EtcdError } from "./errors.js";
import { formatId, idFromSqlite, idToSqlite, type Member } from "./member.js";

interface MemberRow {
  /** CAST(id AS TEXT): exact (idFromSqlite). */
  id: string;
  value: Buffer;
}

export class Membership {
  private readonly members = new Map<NodeId, Member>();
  private readonly removed = new Set<NodeId>();
  private upsertStmt!: WriteStatement<[bigint, Buffer]>;
  private deleteStmt!: WriteStatement<[bigint]>;
  private removedStmt!: WriteStatement<[bigint]>;
  private refusedStmt!: WriteStatement<[number]>;
  private readonly refused = new Set<number>();

  constructor(
    backend: Backend,
    readonly clusterId: NodeId,
  ) {
    backend.register({ name: "membership", schema: MEMBERSHIP_SCHEMA, recover: (tx) => this.recover(tx) });
  }

  private recover(tx: BatchTx): void {
    this.upsertStmt = tx.write("INSERT OR REPLACE INTO members (id, value) VALUES (?, ?)");
    this.deleteStmt = tx.write("DELETE FROM members WHERE id = ?");
    this.removedStmt = tx.write("INSERT OR IGNORE INTO members_removed (id) VALUES (?)");
    this.refusedStmt = tx.write("INSERT OR IGNORE INTO conf_changes_refused (raft_index) VALUES (?)");
    this.members.clear();
    this.removed.clear();
    this.refused.clear();
    for (const row of tx.read<[], { raft_index: number }>("SELECT raft_index FROM conf_changes_refused").all()) {
      this.refused.add(row.raft_index);
    }
    for (const row of tx.read<[], MemberRow>("SELECT CAST(id AS TEXT) AS id, value FROM members").all()) {
      const id = idFromSqlite(row.id);
      this.members.set(id, decodeMember(id, row.value));
    }
    for (const row of tx.read<[], { id: string }>("SELECT CAST(id AS TEXT) AS id FROM members_removed").all()) {
      this.removed.add(idFromSqlite(row.id));
    }
  }

  get size(): number {
    return this.members.size;
  }

  list(): Member[] {
    return [...this.members.values()].sort((a, b) => compareNodeIds(a.id, b.id));
  }

  get(id: NodeId): Member | undefined {
    return this.members.get(id);
  }

  isRemoved(id: NodeId): boolean {
    return this.removed.has(id);
  }

  /** Voting members (etcd's VotingMembers). */
  votingMembers(): Member[] {
    return this.list().filter((m) => !m.isLearner);
  }

  /**
   * The conf change at `raftIndex` was refused by validation and so never reached raft's
   * configuration. Recorded with the entry's apply, so replaying the entry after a restart (raft
   * re-applies every conf change after its snapshot) refuses it again without re-validating
   * against a membership that has moved on.
   */
  recordRefused(raftIndex: number): void {
    this.refused.add(raftIndex);
    this.refusedStmt.run(raftIndex);
  }

  wasRefused(raftIndex: number): boolean {
    return this.refused.has(raftIndex);
  }

  /**
   * etcd's ValidateConfigurationChange: whether the change may be applied to this membership,
   * or the error its proposer answers. Runs at apply time on every member (same answer everywhere).
   */
  validateConfChange(type: ConfChangeType, id: NodeId, ctx: ConfChangeContext | undefined): EtcdError | undefined {
    if (this.removed.has(id)) return Errors.memberNotFound();
    const member = this.members.get(id);
    switch (type) {
      case ConfChangeType.AddNode:
      case ConfChangeType.AddLearnerNode: {
        if (ctx?.isPromote === true) {
          if (member === undefined) return Errors.memberNotFound();
          if (!member.isLearner) return Errors.memberNotLearner();
          return undefined;
        }
        if (member !== undefined) return Errors.memberExist();
        if (ctx !== undefined && this.peerUrlTaken(ctx.member.peerUrls, undefined)) return Errors.peerURLExist();
        if (type === ConfChangeType.AddLearnerNode && this.list().filter((m) => m.isLearner).length + 1 > MAX_LEARNERS) {
          return Errors.tooManyLearners();
        }
        return undefined;
      }
      case ConfChangeType.RemoveNode:
        return member === undefined ? Errors.memberNotFound() : undefined;
      case ConfChangeType.UpdateNode:
        if (member === undefined) return Errors.memberNotFound();
        if (ctx !== undefined && this.peerUrlTaken(ctx.member.peerUrls, id)) return Errors.peerURLExist();
        return undefined;
    }
  }

  /** A URL of `urls` is a peer URL of some member other than `except`. */
  peerUrlTaken(urls: readonly string[], except: NodeId | undefined): boolean {
    const taken = new Set<string>();
    for (const m of this.members.values()) if (m.id !== except) for (const u of m.peerUrls) taken.add(u);
    return urls.some((u) => taken.has(u));
  }

  /** etcd's IsReadyToAddVotingMember: a quorum of the grown voting set has started. */
  isReadyToAddVotingMember(): boolean {
    const voters = this.votingMembers();
    const nmembers = voters.length + 1;
    const nstarted = voters.filter(isStarted).length;
    // Adding a second member to a one-member cluster (to restore its data elsewhere) is allowed.
    if (nstarted === 1 && nmembers === 2) return true;
    return nstarted >= Math.floor(nmembers / 2) + 1;
  }

  /** etcd's IsReadyToRemoveVotingMember: the remaining voters keep a started quorum. */
  isReadyToRemoveVotingMember(id: NodeId): boolean {
    const rest = this.votingMembers().filter((m) => m.id !== id);
    return rest.filter(isStarted).length >= Math.floor(rest.length / 2) + 1;
  }

  /** etcd's IsReadyToPromoteMember: the grown voting set keeps a started quorum (the learner counted as started). */
  isReadyToPromoteMember(): boolean {
    const voters = this.votingMembers();
    const nmembers = voters.length + 1;
    const nstarted = voters.filter(isStarted).length + 1;
    return nstarted >= Math.floor(nmembers / 2) + 1;
  }

  /** Adds or replaces a member (a conf change being applied, or bootstrap). */
  add(m: Member): void {
    if (this.removed.has(m.id)) throw new Error(`membership: member ${formatId(m.id)} was removed and cannot be re-added`);
    this.members.set(m.id, m);
    this.upsertStmt.run(idToSqlite(m.id), encodeMember(m));
  }

  remove(id: NodeId): void {
    this.members.delete(id);
    this.removed.add(id);
    this.deleteStmt.run(idToSqlite(id));
    this.removedStmt.run(idToSqlite(id));
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

/** A member has started once it published its name (etcd's IsStarted). */
export function isStarted(m: Member): boolean {
  return m.name !== "";
}

export function encodeMember(m: Member): Buffer {
  return Buffer.from(
    JSON.stringify({ name: m.name, peerUrls: m.peerUrls, clientUrls: m.clientUrls, isLearner: m.isLearner }),
  );
}

export function decodeMember(id: NodeId, value: Buffer): Member {
  const o = JSON.parse(value.toString()) as {
    name: string;
    peerUrls: string[];
    clientUrls: string[];
    isLearner: boolean;
  };
  return { id, name: o.name, peerUrls: o.peerUrls, clientUrls: o.clientUrls, isLearner: o.isLearner };
}
