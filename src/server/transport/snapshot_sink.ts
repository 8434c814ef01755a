/**
 * Where the data of an incoming MsgSnap goes while it arrives. A member writes it to a temporary
 * file (Snapshots.receive): chunks are written as they come, the socket paused while a write is
 * pending, so memory holds a few chunks whatever the snapshot's size. Without a sink of the
 * member's, the transport reassembles in memory within a budget (memorySnapshotSink).
 */
import type { NodeId } from "../../raft/types.js";
import type { Message } from "../../raft/types.js";
import type { SnapshotKind } from "./snapshot_body.js";

export interface SnapshotSink {
  /** Appends the next chunk (chunks come in order, without gaps). */
  write(chunk: Buffer): Promise<void>;
  /**
   * Every byte arrived and its checksum matched: make the data durable and return the MsgSnap to
   * hand to raft (its data whatever the receiver's stage step understands).
   */
  commit(): Promise<Message>;
  /** The transfer failed or was refused: drop what was received. Safe to call more than once. */
  abort(): Promise<void>;
  /** What the data turned out to be, once committed (for the log and metrics); a full image when absent. */
  kind?(): SnapshotKind;
}

/** Opens the sink of one incoming snapshot of `totalBytes`; throws to refuse it (the reason is sent back). */
export type SnapshotSinkFactory = (from: NodeId, m: Message, totalBytes: number) => Promise<SnapshotSink>;

/** Reassembles in one buffer; `release` returns the memory reservation when the transfer ends. */
export function memorySnapshotSink(m: Message, totalBytes: number, release: () => void): SnapshotSink {
  let data: Buffer | undefined = Buffer.allocUnsafe(totalBytes);
  let received = 0;
  const end = (): void => {
    if (data === undefined) return;
    data = undefined;
    release();
  };
  return {
    write: (chunk) => {
      if (data === undefined) return Promise.reject(new Error("snapshot sink closed"));
      chunk.copy(data, received);
      received += chunk.byteLength;
      return Promise.resolve();
    },
    commit: () => {
      const d = data;
      if (d === undefined) return Promise.reject(new Error("snapshot sink closed"));
      end();
      return Promise.resolve({ ...m, snapshot: { metadata: m.snapshot!.metadata, data: d } });
    },
    abort: () => {
      end();
      return Promise.resolve();
    },
  };
}
