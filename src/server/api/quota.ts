/**
 * The backend quota (etcd's quota.BackendQuota): a write whose cost would take the database past
 * --quota-backend-bytes raises the NOSPACE alarm through Raft and is refused with
 * "etcdserver: mvcc: database space exceeded"; while the alarm is active every write that adds
 * data is refused, on every member.
 */
import { AlarmAction, AlarmType } from "../alarms.js";
import { Errors } from "../errors.js";
import type { V3Server } from "../v3_server.js";

/** etcd's per-key overhead estimate in the backend (kvOverhead). */
const KV_OVERHEAD_BYTES = 256;

/** How long a measured database size is reused: three page-count pragmas per write would add to every write. */
const SIZE_CACHE_MS = 100;

export class Quota {
  private raising: Promise<void> | undefined;
  private sizeBytes = 0;
  private sizeAtMs = -Infinity;

  constructor(private readonly s: V3Server) {}

  /**
   * Throws NOSPACE while the alarm is active. A write that would pass the quota gets a promise
   * that rejects with NOSPACE once the alarm is applied (as etcd raises it before answering); a
   * write within it gets undefined, at once: not an async call per write (`if (p) await p`).
   */
  check(costBytes: number): Promise<never> | undefined {
    const s = this.s;
    if (s.hasAlarm(AlarmType.NOSPACE)) throw Errors.noSpace();
    const quota = s.limits.quotaBackendBytes;
    if (quota === null) return undefined;
    if (this.dbSizeBytes() + costBytes + KV_OVERHEAD_BYTES <= quota) return undefined;
    return this.raise().then(() => {
      throw Errors.noSpace();
    });
  }

  private dbSizeBytes(): number {
    const now = performance.now();
    if (now - this.sizeAtMs > SIZE_CACHE_MS) {
      this.sizeBytes = this.s.backendSizeBytes();
      this.sizeAtMs = now;
    }
    return this.sizeBytes;
  }

  private raise(): Promise<void> {
    const s = this.s;
    this.raising ??= s
      .alarm({ action: AlarmAction.ACTIVATE, memberID: s.memberId, alarm: AlarmType.NOSPACE })
      .then(() => undefined)
      .catch(() => undefined)
      .finally(() => (this.raising = undefined));
    return this.raising;
  }
}
