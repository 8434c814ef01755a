/**
 * The backend quota (etcd's quota.BackendQuota): a write whose cost would take the database past
 * --quota-backend-bytes raises the NOSPACE alarm through Raft and is refused with
 * "etcdserver: mvcc: database space exceeded"; while the alarm is active every write that adds
 * data is refused, on every member.
 */
import { AlarmAction, AlarmType } from "../alarms.js";
import type { EtcdServer } from "../etcdserver.js";
import { Errors } from "../errors.js";

/** etcd's per-key overhead estimate in the backend (kvOverhead). */
const KV_OVERHEAD_BYTES = 256;

export class Quota {
  private raising: Promise<void> | undefined;

  constructor(private readonly s: EtcdServer) {}

  /** Throws NOSPACE, after the alarm is applied (as etcd raises it before answering). */
  async check(costBytes: number): Promise<void> {
    const s = this.s;
    if (s.alarms.has(AlarmType.NOSPACE)) throw Errors.noSpace();
    const quota = s.config.quotaBackendBytes;
    if (quota === null) return;
    if (s.kv.sizeBytes() + costBytes + KV_OVERHEAD_BYTES <= quota) return;
    await this.raise();
    throw Errors.noSpace();
  }

  private raise(): Promise<void> {
    const s = this.s;
    this.raising ??= s
      .proposeAndApply({ alarm: { action: AlarmAction.ACTIVATE, memberID: s.memberId, alarm: AlarmType.NOSPACE } })
      .then(() => undefined)
      .catch(() => undefined)
      .finally(() => (this.raising = undefined));
    return this.raising;
  }
}
