/**
 * The apply loop's dispatcher (etcd's applierV3): every committed entry goes to the store it
 * concerns — kv requests to the MVCC store, lease requests to the lessor, alarms, members — in
 * log order, each exactly once: the backend's consistent index makes re-applying after a restart
 * a no-op. The outcome goes back to the handler waiting on the request id.
 */
import type { AuthStore } from "../auth/store.js";
import type { TokenProvider } from "../auth/token.js";
import type { Lessor } from "../lease/lessor.js";
import type { KvStore } from "../mvcc/kvstore.js";
import { txnHasPut } from "../mvcc/txn_rules.js";
import { confChangeFromEntry } from "../raft/index.js";
import { ConfChangeType, EntryType, type ConfChangeV2, type ConfState, type Entry, type NodeId } from "../raft/types.js";
import { AlarmAction, AlarmType, type Alarms } from "./alarms.js";
import { applyAuthRequest, authInfoOfEntry, checkEntryPermission } from "./apply_auth.js";
import { Errors, toEtcdError } from "./errors.js";
import type { Logger } from "./logger.js";
import { decodeConfChangeContext, type ConfChangeContext } from "./conf_change_context.js";
import { formatId, type Member } from "./member.js";
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
  auth: AuthStore;
  tokens: TokenProvider;
  logger: Logger;
  /** The bootstrap members by id: conf changes of the initial cluster carry no member record. */
  initialMembers: ReadonlyMap<NodeId, Member>;
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
    return this.applyConfChangeEntry(e);
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
    // etcd's applierV3Corrupt: with a CORRUPT alarm raised, kv and lease requests are refused.
    if (this.o.alarms.has(AlarmType.CORRUPT) && (req.put || req.txn || req.deleteRange || req.range || req.compaction || req.leaseGrant || req.leaseRevoke)) {
      if (!kv.markApplied(e.index, e.term)) return undefined;
      return { revision: kv.currentRevision(), error: Errors.corrupt() };
    }
    try {
      checkEntryPermission(this.o.auth, this.o.lessor, req, authInfoOfEntry(req));
    } catch (err) {
      // Refused entries still advance the consistent index (etcd applies them as errors).
      if (!kv.markApplied(e.index, e.term)) return undefined;
      return { revision: kv.currentRevision(), error: toEtcdError(err) };
    }
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
    if (!kv.markApplied(e.index, e.term)) {
      // The backend holds this entry already: a snapshot image copied after it (the leader sends
      // its current backend). A member's own publication, proposed before the image arrived, is
      // in the image, and is answered as etcd answers it (a v2 request there, applied and answered
      // whatever the consistent index); left unanswered, a member caught up by snapshot waited out
      // the request timeout (7 s) before it served. Other requests stay as etcd leaves them.
      return req.memberAttributes ? { revision: kv.currentRevision(), response: {} } : undefined;
    }
    try {
      return this.dispatchNonKv(req, e.index);
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

  private dispatchNonKv(req: InternalRaftRequest, index: number): ApplyOutcome {
    const { kv, lessor, alarms, membership } = this.o;
    const authResponse = applyAuthRequest(this.o.auth, this.o.tokens, req, index);
    if (authResponse !== undefined) return { revision: kv.currentRevision(), response: authResponse };
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

  /**
   * A conf change entry, as etcd's applyConfChange: validated against the membership first (on
   * every member, with the same answer); a refused change never reaches raft's configuration and
   * its proposer gets the refusal. A replayed entry (already applied to the backend before a
   * restart) only goes back into raft's configuration, as it did the first time.
   */
  private applyConfChangeEntry(e: Entry): { id: number; outcome: ApplyOutcome } | undefined {
    const { kv, membership, logger } = this.o;
    const cc = confChangeFromEntry(e);
    const ctx = decodeConfChangeContext(cc.context);
    if (e.index <= kv.consistentIndex()) {
      if (!membership.wasRefused(e.index)) this.o.applyConfChange(cc);
      return undefined;
    }
    for (const ch of cc.changes) {
      const refusal = membership.validateConfChange(ch.type, ch.nodeId, ctx);
      if (refusal === undefined) continue;
      membership.recordRefused(e.index);
      kv.markApplied(e.index, e.term);
      logger.warn({ memberId: formatId(ch.nodeId), change: ConfChangeType[ch.type], error: refusal.message }, "refused configuration change");
      if (ctx === undefined || ctx.requestId === 0) return undefined;
      return { id: ctx.requestId, outcome: { revision: kv.currentRevision(), error: refusal } };
    }
    const cs = this.o.applyConfChange(cc);
    kv.markApplied(e.index, e.term);
    for (const ch of cc.changes) this.applyMemberChange(ch.type, ch.nodeId, ctx);
    logger.info({ voters: cs.voters.map(formatId), learners: cs.learners.map(formatId) }, "applied configuration change");
    this.o.onMembershipChange();
    if (ctx === undefined || ctx.requestId === 0) return undefined;
    return { id: ctx.requestId, outcome: { revision: kv.currentRevision(), response: membership.list() } };
  }

  private applyMemberChange(type: ConfChangeType, id: NodeId, ctx: ConfChangeContext | undefined): void {
    const { membership, initialMembers, logger } = this.o;
    switch (type) {
      case ConfChangeType.AddNode:
      case ConfChangeType.AddLearnerNode: {
        const isLearner = type === ConfChangeType.AddLearnerNode;
        const existing = membership.get(id);
        if (existing !== undefined) {
          if (existing.isLearner && !isLearner) {
            membership.promote(id);
            logger.info({ memberId: formatId(id) }, "promoted learner member to voting member");
          }
          return;
        }
        const m = ctx?.member ?? initialMembers.get(id);
        if (m === undefined) throw new Error(`apply: conf change adds member ${formatId(id)} with no member record`);
        membership.add({ ...m, id, isLearner });
        logger.info({ memberId: formatId(id), peerUrls: m.peerUrls, isLearner }, isLearner ? "added learner member" : "added member");
        return;
      }
      case ConfChangeType.RemoveNode:
        membership.remove(id);
        logger.info({ memberId: formatId(id) }, "removed member");
        return;
      case ConfChangeType.UpdateNode: {
        const m = membership.get(id);
        if (m !== undefined && ctx !== undefined) {
          membership.add({ ...m, peerUrls: [...ctx.member.peerUrls] });
          logger.info({ memberId: formatId(id), peerUrls: ctx.member.peerUrls }, "updated member");
        }
        return;
      }
    }
  }
}
