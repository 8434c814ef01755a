import { assert } from "./assert.js";
import type { Message, NodeId } from "./types.js";

/**
 * ReadIndex bookkeeping on the leader (etcd's readOnly). A read is registered with the commit
 * index at the time it arrived, then released once a heartbeat round sent after it is
 * acknowledged by a quorum. One round releases every read queued before the acknowledged one.
 */
export type ReadOnlyOption = "safe" | "lease-based";

export interface ReadIndexStatus {
  req: Message;
  index: number;
  acks: Map<NodeId, boolean>;
}

/** Pending reads on one leader at most; more are dropped (the client retries on timeout). */
export const PENDING_READS_MAX = 4096;

export class ReadOnly {
  readonly pendingReadIndex = new Map<string, ReadIndexStatus>();
  readIndexQueue: string[] = [];

  constructor(readonly option: ReadOnlyOption) {}

  /** Register a read (m.entries[0].data is its request context); false if the queue is full. */
  addRequest(index: number, m: Message): boolean {
    const key = ctxKey(m.entries[0].data);
    if (this.pendingReadIndex.has(key)) return true;
    if (this.readIndexQueue.length >= PENDING_READS_MAX) return false;
    this.pendingReadIndex.set(key, { index, req: m, acks: new Map() });
    this.readIndexQueue.push(key);
    return true;
  }

  /** Record a heartbeat acknowledgement carrying `context`; returns the acks so far. */
  recvAck(id: NodeId, context: Uint8Array): Map<NodeId, boolean> | undefined {
    const rs = this.pendingReadIndex.get(ctxKey(context));
    if (rs === undefined) return undefined;
    rs.acks.set(id, true);
    return rs.acks;
  }

  /** Release the read with `context` and every read queued before it. */
  advance(context: Uint8Array): ReadIndexStatus[] {
    const key = ctxKey(context);
    const pos = this.readIndexQueue.indexOf(key);
    if (pos < 0) return [];
    const released = this.readIndexQueue.slice(0, pos + 1);
    this.readIndexQueue = this.readIndexQueue.slice(pos + 1);
    const out: ReadIndexStatus[] = [];
    for (const k of released) {
      const rs = this.pendingReadIndex.get(k);
      assert(rs !== undefined, "cannot find corresponding read state from pending map");
      out.push(rs);
      this.pendingReadIndex.delete(k);
    }
    return out;
  }

  /** Context of the newest pending read, to piggyback on the next heartbeat. */
  lastPendingRequestCtx(): Uint8Array | undefined {
    if (this.readIndexQueue.length === 0) return undefined;
    const key = this.readIndexQueue[this.readIndexQueue.length - 1];
    return this.pendingReadIndex.get(key)?.req.entries[0].data;
  }
}

/** A Uint8Array as a map key (one char per byte; never decoded as text). */
export function ctxKey(ctx: Uint8Array): string {
  let s = "";
  for (let i = 0; i < ctx.byteLength; i++) s += String.fromCharCode(ctx[i]);
  return s;
}
