/**
 * Where the data of an outgoing MsgSnap comes from. A member's snapshot is a database image on
 * disk (etcd's snapshotSender reads its bolt snapshot as a stream): the sender reads it one chunk
 * at a time, as the socket drains, so its memory is a few chunks whatever the image's size. Data
 * already in memory (raft's own snapshot data, tests) is a body too.
 */
import { type FileHandle, open } from "node:fs/promises";

/** What a snapshot's data is: a full database image, or a delta over the follower's base revision (issue 19). */
export interface SnapshotKind {
  incremental: boolean;
  baseRevision?: number;
}

export interface SnapshotBody {
  readonly sizeBytes: number;
  /** For the log and metrics; a body without one is a full image. */
  kind?: SnapshotKind;
  /**
   * Bytes the receiver reads before it acknowledges, when more than the body (a delta: the
   * follower hashes its base first); the sender's wait for the acknowledgement allows for them.
   */
  ackWaitBytes?: number;
  /** Fills `buf` from `position` on; returns the bytes read (fewer only at the end). */
  read(buf: Buffer, position: number): Promise<number>;
  /** The transfer is over (either way): the body's resources go. Called exactly once. */
  release(): Promise<void>;
}

export function memorySnapshotBody(data: Uint8Array): SnapshotBody {
  return {
    sizeBytes: data.byteLength,
    read: (buf, position) => {
      const part = data.subarray(position, Math.min(position + buf.byteLength, data.byteLength));
      buf.set(part);
      return Promise.resolve(part.byteLength);
    },
    release: () => Promise.resolve(),
  };
}

/** A body read from the file at `path`; `onRelease` runs after the file is closed (e.g. removes it). */
export async function fileSnapshotBody(path: string, onRelease: () => Promise<void>): Promise<SnapshotBody> {
  let fh: FileHandle;
  try {
    fh = await open(path, "r");
  } catch (e) {
    await onRelease();
    throw e;
  }
  const { size } = await fh.stat();
  let released = false;
  return {
    sizeBytes: size,
    read: async (buf, position) => {
      let filled = 0;
      while (filled < buf.byteLength) {
        const { bytesRead } = await fh.read(buf, filled, buf.byteLength - filled, position + filled);
        if (bytesRead === 0) break;
        filled += bytesRead;
      }
      return filled;
    },
    release: async () => {
      if (released) return;
      released = true;
      try {
        await fh.close();
      } finally {
        await onRelease();
      }
    },
  };
}
