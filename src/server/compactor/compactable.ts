/**
 * What an auto-compactor needs of the member (etcd's v3compactor RevGetter and Compactable): the
 * current store revision, and a Compact that goes through raft like a client's CompactionRequest.
 */
export interface Compactable {
  /** The store's current revision (etcd's kv.Rev()). */
  rev(): number;
  /** Proposes a compaction at `revision` and resolves once it is applied; rejects with the store's error. */
  compact(revision: number): Promise<void>;
  /** True for the store's "required revision has been compacted" (which counts as done, as in etcd). */
  isCompacted(err: unknown): boolean;
}

/** Every compactor: runs in the background, paused while the member is not the leader. */
export interface Compactor {
  run(): void;
  stop(): void;
  pause(): void;
  resume(): void;
}
