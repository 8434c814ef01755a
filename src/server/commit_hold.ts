/**
 * Holds the leader's commit-only appends (a MsgApp without entries) for a moment, so that the
 * commit index rides on the next append with entries instead of costing a message of its own.
 *
 * Why: etcd's raft broadcasts an empty MsgApp to every follower whenever the commit index moves,
 * and each follower answers it. With one client that is, per put, two more messages out of the
 * leader, two back, and a Ready on each follower (read, step, a hard-state write, the answer):
 * about a third of all the traffic of a put, on a path where every message is a wake-up of a
 * process that shares the cores with the others. The next put's MsgApp follows within about a
 * round trip to the client and carries the same commit index, so the held message is dropped;
 * when none follows within `holdMs`, the held one goes out as it was.
 *
 * Safe because raft tolerates any message being lost (a follower learns the commit index from
 * the next append or heartbeat; nothing waits on the answer to an empty append except progress
 * tracking, which the later append's answer serves). What it costs: a follower may apply an
 * entry up to `holdMs` later than it would have (serializable reads on it are that much staler);
 * linearizable reads are unaffected (a follower's ReadIndex waits for the leader's commit index,
 * which a heartbeat brings). Order is kept: any other message to the same peer flushes the held
 * one first, unless it is an append of the same term, which carries a commit index at least as high.
 */
import { assert } from "../raft/assert.js";
import { MessageType, type Message, type NodeId } from "../raft/types.js";

export class CommitHold {
  private readonly held = new Map<NodeId, Message>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly holdMs: number,
    private readonly sendNow: (msgs: Message[]) => void,
  ) {
    assert(holdMs >= 0, "commit hold: negative hold");
  }

  /** Sends `msgs` (in order), holding commit-only appends; drops a held one a later append supersedes. */
  send(msgs: Message[]): void {
    if (this.holdMs === 0) {
      this.sendNow(msgs);
      return;
    }
    let out: Message[] | undefined;
    for (const m of msgs) {
      const prev = this.held.get(m.to);
      if (isCommitOnlyAppend(m)) {
        // A newer empty append to the same peer replaces the held one (same leader, a commit index
        // at least as high); one of an older term cannot be newer, so it goes first.
        if (prev !== undefined && prev.term !== m.term) (out ??= []).push(prev);
        this.held.set(m.to, m);
        continue;
      }
      if (prev !== undefined) {
        this.held.delete(m.to);
        if (m.type === MessageType.MsgApp && m.term === prev.term) {
          assert(m.commit >= prev.commit, "commit hold: a later append of the same term carries a lower commit index");
        } else {
          (out ??= []).push(prev);
        }
      }
      (out ??= []).push(m);
    }
    if (out !== undefined) this.sendNow(out);
    if (this.held.size > 0 && this.timer === undefined) this.timer = setTimeout(() => this.flush(), this.holdMs);
  }

  /** Sends whatever is held now (the timer, a leadership change, a stop). */
  flush(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.held.size === 0) return;
    const msgs = [...this.held.values()];
    this.held.clear();
    this.sendNow(msgs);
  }

  /** Drops what is held (the member stops; raft tolerates the loss). */
  clear(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.held.clear();
  }
}

function isCommitOnlyAppend(m: Message): boolean {
  return m.type === MessageType.MsgApp && m.entries.length === 0;
}

/** The default hold: about a client's round trip on a loaded host, far below a heartbeat. */
export const COMMIT_HOLD_MS_DEFAULT = 2;

/**
 * The hold from ETCETERA_COMMIT_HOLD_MS (0 sends every commit-only append at once, as etcd does;
 * for A/B measurements, etcd has no such flag), refused unless an integer in [0, 50].
 */
export function commitHoldMsFromEnv(env: NodeJS.ProcessEnv): number | { error: string } {
  const raw = env.ETCETERA_COMMIT_HOLD_MS;
  if (raw === undefined) return COMMIT_HOLD_MS_DEFAULT;
  if (!/^\d+$/.test(raw) || Number(raw) > 50) return { error: `ETCETERA_COMMIT_HOLD_MS must be an integer in [0, 50], got ${JSON.stringify(raw)}` };
  return Number(raw);
}
