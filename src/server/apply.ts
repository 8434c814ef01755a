/**
 * The apply loop's dispatcher (etcd's applierV3): every committed entry goes to the store it
 * concerns — kv requests to the MVCC store, lease requests to the lessor, alarms, members — in
 * log order, each exactly once: the backend's consistent index makes re-applying after a restart
 * a no-op. The outcome goes back to the handler waiting on the request id.
 */
import type { Lessor } from "../lease/lessor.js";
import type { KvStore } from "../mvcc/kvstore.js";
import { txnHasPut } from "../mvcc/txn_rules.js";
import { confChangeFromEntry } from "../raft/index.js";
import { ConfChangeType, EntryType, type ConfChangeV2, type ConfState, type Entry } from "../raft/types.js";
import { AlarmAction, AlarmType, type Alarms } from "./alarms.js";
import { Errors, toEtcdError } from "./errors.js";
import type { Logger } from "./logger.js";
import type { Member } from "./member.js";
import type { Membership } from "./membership.js";
import { decodeRaftRequest, type InternalRaftRequest } from "./raft_request.js";

/** What the waiting handler receives. */
export interface ApplyOutcome {
  /** Store revision after the request (the response header's revision). */
  revision: number;
  response?: unknown;
  error?: Error;
  /** A physical compaction's completion. */
  done?: Promise<void>;
}

export interface ApplierOptions {
  kv: KvStore;
  lessor: Lessor;
  membership: Membership;
  alarms: Alarms;
  logger: Logger;
  /** The bootstrap members by id: conf changes of the initial cluster carry no member record. */
  initialMembers: ReadonlyMap<number, Member>;
  /** raft's ApplyConfChange; must run for every conf-change entry, replayed ones included. */
  applyConfChange(cc: ConfChangeV2): ConfState;
  /** The membership changed (peers to add to or remove from the transport). */
  onMembershipChange(): void;
}

export class Applier {
  constructor(private readonly o: ApplierOptions) {}

  /** Applies one entry; returns the request id and its outcome when a handler may be waiting. */
  apply(e: Entry): { id: number; outcome: ApplyOutcome } | undefined {
    if (e.type === EntryType.Normal) return this.applyNormal(e);
    this.applyConfChangeEntry(e);
    return undefined;
  }

  private applyNormal(e: Entry): { id: number; outcome: ApplyOutcome } | undefined {
    const { kv } = this.o;
    if (e.data.length === 0) {
      // A new leader's no-op entry.
      kv.markApplied(e.index, e.term);
      return undefined;
    }
    const req = decodeRaftRequest(e.data);
    const outcome = this.dispatch(e, req);
    return outcome === undefined ? undefined : { id: req.ID, outcome };
  }

  private dispatch(e: Entry, req: InternalRaftRequest): ApplyOutcome | undefined {
    const { kv } = this.o;
    if (req.put || req.txn || req.deleteRange || req.range || req.compaction) {
      if (this.o.alarms.has(AlarmType.NOSPACE) && (req.put || (req.txn && txnHasPut(req.txn)))) {
        if (!kv.markApplied(e.index, e.term)) return undefined;
        return { revision: kv.currentRevision(), error: Errors.noSpace() };
      }
      const r = kv.apply(e.index, e.term, {
        put: req.put,
        txn: req.txn,
        deleteRange: req.deleteRange,
        range: req.range,
        compaction: req.compaction,
      });
      if (r === null) return undefined;
      if (req.compaction && !r.error) this.logCompaction(req.compaction.revision ?? 0, r.compaction);
      const response = r.put ?? r.txn ?? r.deleteRange ?? r.range ?? {};
      return { revision: r.revision, response, error: r.error, done: r.compaction };
    }
    if (!kv.markApplied(e.index, e.term)) return undefined;
    try {
      return this.dispatchNonKv(req);
    } catch (err) {
      return { revision: kv.currentRevision(), error: toEtcdError(err) };
    }
  }

  private logCompaction(revision: number, done: Promise<void> | undefined): void {
    const started = Date.now();
    this.o.logger.info({ compactRevision: revision }, "scheduled compaction");
    void done?.then(
      () => this.o.logger.info({ compactRevision: revision, tookMs: Date.now() - started }, "finished scheduled compaction"),
      (err: unknown) => this.o.logger.warn({ compactRevision: revision, err: String(err) }, "compaction failed"),
    );
  }

  private dispatchNonKv(req: InternalRaftRequest): ApplyOutcome {
    const { kv, lessor, alarms, membership } = this.o;
    if (req.leaseGrant) {
      if (alarms.has(AlarmType.NOSPACE)) return { revision: kv.currentRevision(), error: Errors.noSpace() };
      const g = lessor.grant(req.leaseGrant.ID, req.leaseGrant.TTL);
      return { revision: kv.currentRevision(), response: { ID: g.id, TTL: g.ttlSec, error: "" } };
    }
    if (req.leaseRevoke) {
      lessor.revoke(req.leaseRevoke.ID);
      return { revision: kv.currentRevision(), response: {} };
    }
    if (req.leaseCheckpoint) {
      for (const c of req.leaseCheckpoint.checkpoints) lessor.checkpoint(c.ID, c.remaining_TTL);
      return { revision: kv.currentRevision(), response: {} };
    }
    if (req.alarm) {
      const a = req.alarm;
      const changed =
        a.action === AlarmAction.ACTIVATE
          ? alarms.activate(a.memberID, a.alarm)
          : a.action === AlarmAction.DEACTIVATE
            ? alarms.deactivate(a.memberID, a.alarm)
            : undefined;
      if (changed) this.o.logger.warn({ alarm: AlarmType[a.alarm], memberId: a.memberID.toString(16), action: AlarmAction[a.action] }, "alarm changed");
      return { revision: kv.currentRevision(), response: { alarms: changed ? [changed] : [] } };
    }
    if (req.memberAttributes) {
      const m = req.memberAttributes;
      membership.setAttributes(m.member_ID, m.name, m.clientUrls);
      this.o.logger.info({ memberId: m.member_ID.toString(16), name: m.name, clientUrls: m.clientUrls }, "member published its attributes");
      return { revision: kv.currentRevision(), response: {} };
    }
    throw new Error("apply: entry carries no known request");
  }

  private applyConfChangeEntry(e: Entry): void {
    const cc = confChangeFromEntry(e);
    const cs = this.o.applyConfChange(cc);
    if (!this.o.kv.markApplied(e.index, e.term)) return;
    const { membership, initialMembers, logger } = this.o;
    for (const ch of cc.changes) {
      switch (ch.type) {
        case ConfChangeType.AddNode:
        case ConfChangeType.AddLearnerNode: {
          const isLearner = ch.type === ConfChangeType.AddLearnerNode;
          const existing = membership.get(ch.nodeId);
          if (existing !== undefined) {
            if (existing.isLearner && !isLearner) membership.promote(ch.nodeId);
            break;
          }
          const m = memberFromContext(cc.context) ?? initialMembers.get(ch.nodeId);
          if (m === undefined) throw new Error(`apply: conf change adds member ${ch.nodeId.toString(16)} with no member record`);
          membership.add({ ...m, id: ch.nodeId, isLearner });
          logger.info({ memberId: ch.nodeId.toString(16), peerUrls: m.peerUrls, isLearner }, "added member");
          break;
        }
        case ConfChangeType.RemoveNode:
          membership.remove(ch.nodeId);
          logger.info({ memberId: ch.nodeId.toString(16) }, "removed member");
          break;
        case ConfChangeType.UpdateNode: {
          const m = memberFromContext(cc.context);
          if (m !== undefined) membership.add({ ...m, id: ch.nodeId });
          break;
        }
      }
    }
    logger.info({ voters: cs.voters.map((v) => v.toString(16)), learners: cs.learners.map((v) => v.toString(16)) }, "applied configuration change");
    this.o.onMembershipChange();
  }
}

/** Members added at runtime carry their record as JSON in the conf change context (as etcd). */
function memberFromContext(ctx: Uint8Array): Member | undefined {
  if (ctx.length === 0) return undefined;
  const o = JSON.parse(Buffer.from(ctx).toString()) as Partial<Member>;
  if (typeof o.id !== "number" || !Array.isArray(o.peerUrls)) throw new Error("apply: malformed member record in conf change");
  return { id: o.id, name: o.name ?? "", peerUrls: o.peerUrls, clientUrls: o.clientUrls ?? [], isLearner: o.isLearner ?? false };
}
