/**
 * Corruption checks (etcd 3.4's etcdserver/corrupt.go), comparing HashKV across members:
 *
 * - initial (--experimental-initial-corrupt-check): before the member serves clients, its HashKV
 *   at its current revision against every peer's at the same revision; a different hash at the
 *   same compact revision refuses the start ("<id> found data inconsistency with peers").
 * - periodic (--experimental-corrupt-check-time): every interval the leader takes its HashKV,
 *   the peers' at that revision, then (after a linearizable read barrier) its own again; a member
 *   whose revision or compact revision is ahead of the leader's, or whose hash differs at the
 *   same compact revision, gets the CORRUPT alarm through raft, on every member, after which the
 *   applier refuses writes with "etcdserver: corrupt cluster". Also the leader itself, if its own
 *   hash changed with nothing applied in between.
 */
import type { HashKvResult } from "../../mvcc/kvstore.js";
import type { NodeId } from "../../raft/types.js";
import { AlarmAction, AlarmType } from "../alarms.js";
import type { Logger } from "../logger.js";
import { formatId } from "../member.js";
import { formatGoDuration } from "../../go_duration.js";
import { getPeerHashKVs, type PeerEndpoints, type PeerHashKv } from "./peer_hashkv.js";

const FUTURE_REV = "etcdserver: mvcc: required revision is a future revision";
const COMPACTED = "etcdserver: mvcc: required revision has been compacted";

export interface CorruptionCheckOptions {
  memberId: NodeId;
  /** This member's HashKV at the current revision (rev 0). */
  hashKV(): Promise<HashKvResult>;
  /** Every other member with its client URLs. */
  peers(): PeerEndpoints[];
  isLeader(): boolean;
  /** A linearizable read barrier (etcd's linearizableReadNotify). */
  readBarrier(): Promise<void>;
  /** Raises an alarm through raft. */
  raiseAlarm(req: { memberID: NodeId; action: AlarmAction; alarm: AlarmType }): Promise<void>;
  /** etcd's ReqTimeout. */
  requestTimeoutMs: number;
  logger: Logger;
  /** The peers' HashKV (replaceable in unit tests). */
  peerHashKVs?: (peers: readonly PeerEndpoints[], rev: number, timeoutMs: number) => Promise<PeerHashKv[]>;
}

export class CorruptionCheck {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly peerHashKVs: NonNullable<CorruptionCheckOptions["peerHashKVs"]>;

  constructor(private readonly o: CorruptionCheckOptions) {
    this.peerHashKVs = o.peerHashKVs ?? getPeerHashKVs;
  }

  /** etcd's CheckInitialHashKV: throws when a peer has another hash at the same revision and compact revision. */
  async initialCheck(): Promise<void> {
    const local = formatId(this.o.memberId);
    this.o.logger.info({ "local-member-id": local, timeout: formatGoDuration(this.o.requestTimeoutMs) }, "starting initial corruption check");
    const h = await this.o.hashKV();
    const peers = await this.peerHashKVs(this.o.peers(), h.revision, this.o.requestTimeoutMs);
    let mismatch = 0;
    for (const p of peers) {
      const fields = { "local-member-id": local, "local-member-hash": h.hash, "local-member-revision": h.revision, "local-member-compact-revision": h.compactRevision };
      if (p.resp !== undefined) {
        const remote = { "remote-peer-id": formatId(p.resp.memberId), "remote-peer-hash": p.resp.hash, "remote-peer-revision": p.resp.revision, "remote-peer-compact-revision": p.resp.compactRevision };
        if (h.hash !== p.resp.hash) {
          if (h.compactRevision === p.resp.compactRevision) {
            this.o.logger.warn({ ...fields, ...remote }, "found different hash values from remote peer");
            mismatch++;
          } else {
            this.o.logger.warn({ ...fields, ...remote }, "found different compact revision values from remote peer");
          }
        }
        continue;
      }
      const remote = { "local-member-id": local, "local-member-revision": h.revision, "remote-peer-id": formatId(p.id), error: p.err };
      if (p.err === FUTURE_REV) this.o.logger.warn(remote, "cannot fetch hash from slow remote peer");
      else if (p.err === COMPACTED) this.o.logger.warn(remote, "cannot fetch hash from remote peer; local member is behind");
      else this.o.logger.warn(remote, "failed hash kv request");
    }
    if (mismatch > 0) throw new Error(`${local} found data inconsistency with peers`);
    this.o.logger.info({ "local-member-id": local }, "initial corruption checking passed; no corruption");
  }

  /** etcd's monitorKVHash: every `intervalMs`, the leader checks (failures are logged). */
  start(intervalMs: number): void {
    if (intervalMs <= 0) return;
    this.o.logger.info({ "local-member-id": formatId(this.o.memberId), interval: formatGoDuration(intervalMs) }, "enabled corruption checking");
    const loop = (): void => {
      this.timer = setTimeout(() => {
        if (this.stopped) return;
        if (!this.o.isLeader()) return loop();
        this.checkHashKV().then(
          () => loop(),
          (err: unknown) => {
            this.o.logger.warn({ error: String(err) }, "failed to check hash KV");
            loop();
          },
        );
      }, intervalMs);
      this.timer.unref();
    };
    loop();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** etcd's checkHashKV: one pass of the leader's check. Resolves with the member ids alarmed. */
  async checkHashKV(): Promise<NodeId[]> {
    const first = await this.o.hashKV();
    const peers = await this.peerHashKVs(this.o.peers(), first.revision, this.o.requestTimeoutMs);
    await this.o.readBarrier();
    const second = await this.o.hashKV();
    const { hash: h, revision: rev, compactRevision: crev } = first;
    const { hash: h2, revision: rev2, compactRevision: crev2 } = second;

    // etcd raises at most one alarm per pass.
    const alarmed: NodeId[] = [];
    const mismatch = (id: NodeId): void => {
      if (alarmed.length > 0) return;
      alarmed.push(id);
      this.o.raiseAlarm({ memberID: id, action: AlarmAction.ACTIVATE, alarm: AlarmType.CORRUPT }).catch((err: unknown) => {
        this.o.logger.warn({ error: String(err) }, "failed to raise the CORRUPT alarm");
      });
    };

    if (h2 !== h && rev2 === rev && crev === crev2) {
      this.o.logger.warn(
        { "revision-1": rev, "compact-revision-1": crev, "hash-1": h, "revision-2": rev2, "compact-revision-2": crev2, "hash-2": h2 },
        "found hash mismatch",
      );
      mismatch(this.o.memberId);
    }
    let checked = 0;
    for (const p of peers) {
      if (p.resp === undefined) continue;
      checked++;
      const id = p.resp.memberId;
      const peer = formatId(id);
      if (p.resp.revision > rev2) {
        this.o.logger.warn({ "leader-revision": rev2, "follower-revision": p.resp.revision, "follower-peer-id": peer }, "revision from follower must be less than or equal to leader's");
        mismatch(id);
      }
      if (p.resp.compactRevision > crev2) {
        this.o.logger.warn(
          { "leader-compact-revision": crev2, "follower-compact-revision": p.resp.compactRevision, "follower-peer-id": peer },
          "compact revision from follower must be less than or equal to leader's",
        );
        mismatch(id);
      }
      if (p.resp.compactRevision === crev && p.resp.hash !== h) {
        this.o.logger.warn(
          { "leader-compact-revision": crev2, "leader-hash": h, "follower-compact-revision": p.resp.compactRevision, "follower-hash": p.resp.hash, "follower-peer-id": peer },
          "same compact revision then hashes must match",
        );
        mismatch(id);
      }
    }
    this.o.logger.info({ "number-of-peers-checked": checked }, "finished peer corruption check");
    return alarmed;
  }
}
