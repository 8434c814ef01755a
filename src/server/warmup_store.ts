/**
 * The stateful part of the warm-up (src/server/warmup.ts; issue 18, cold start): what a committed
 * entry costs a member after raft is done with it — the request decode, the permission check, the
 * apply into MVCC (key index, the SQLite rows through the batch transaction, the batch commit),
 * the watchers' notify with prev_kv, and a serializable range read — run on a scratch store.
 *
 * Why: after the pure-codec warm-up, what a fresh member still compiled during its first
 * requests (--trace-opt) was mostly this stateful path (apply, the kv and guard wrappers, the
 * backend's rows), which a warm-up without a store cannot reach (docs/multicore.md, "Cold start").
 * The functions are the member's own: the same classes, so the same code, type feedback and
 * optimized code, serve the member's own store afterwards.
 *
 * The scratch store is a fresh backend in a new directory under the OS's temp dir, removed when
 * the warm-up ends (also when it fails). Nothing here touches the member's data dir, stores or
 * listeners.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { newTokenProvider } from "../auth/providers.js";
import { AuthStore } from "../auth/store.js";
import type { TokenProvider } from "../auth/token.js";
import { Backend } from "../backend/backend.js";
import { Lessor } from "../lease/lessor.js";
import { KvStore } from "../mvcc/kvstore.js";
import type { WatchStream } from "../mvcc/watch_stream.js";
import { WatchableStore } from "../mvcc/watchable_store.js";
import { type Entry, EntryType } from "../raft/types.js";
import { Alarms } from "./alarms.js";
import { Applier } from "./apply.js";
import { silentLogger } from "./logger.js";
import { Membership } from "./membership.js";

/** What one scratch store verified: each count is of operations that gave the expected answer. */
export interface StoreWarmupCounts {
  /** Entries applied with the revision and response the request called for. */
  applied: number;
  /** Watch events delivered to the scratch watcher (with their prev_kv). */
  watchEvents: number;
  /** Serializable ranges through the store's sliced read that found the key. */
  ranges: number;
}

export class StoreWarmupError extends Error {
  constructor(what: string) {
    super(`warm-up: ${what}`);
    this.name = "StoreWarmupError";
  }
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new StoreWarmupError(what);
}

const SCRATCH_CLUSTER_ID = 0xcdf818194e3a8c32n;
const SCRATCH_MEMBER_ID = 0x8e9e05c52164694dn;

/**
 * A member's stores (backend, lessor, MVCC, watchable store, alarms, auth, membership) and its
 * applier, on a scratch backend, with one watcher over the keys the warm-up writes.
 */
export class ScratchStore {
  readonly counts: StoreWarmupCounts = { applied: 0, watchEvents: 0, ranges: 0 };
  private readonly backend: Backend;
  private readonly kv: KvStore;
  private readonly watchable: WatchableStore;
  private readonly tokens: TokenProvider;
  private readonly stream: WatchStream;
  private readonly applier: Applier;
  private lastRevision: number;
  private closed = false;

  private constructor(private readonly dir: string) {
    this.backend = Backend.open(join(dir, "db"));
    const lessor = new Lessor({ backend: this.backend, now: () => performance.now(), memberId: SCRATCH_MEMBER_ID });
    this.kv = KvStore.open({ backend: this.backend, leases: lessor });
    lessor.setRangeDeleter(this.kv);
    this.watchable = new WatchableStore(this.kv);
    const alarms = new Alarms(this.backend);
    this.tokens = newTokenProvider(
      { kind: "simple", options: new Map() },
      { simpleTtlMs: 300_000, now: () => performance.now(), waitApplied: () => Promise.resolve(), parseDurationMs: () => 0 },
    );
    const auth = new AuthStore({ backend: this.backend, tokens: this.tokens });
    const membership = new Membership(this.backend, SCRATCH_CLUSTER_ID);
    this.applier = new Applier({
      kv: this.kv,
      lessor,
      membership,
      alarms,
      auth,
      tokens: this.tokens,
      logger: silentLogger(),
      initialMembers: new Map(),
      applyConfChange: () => {
        throw new StoreWarmupError("a conf change reached the scratch store"); // apply() passes none on
      },
      onMembershipChange: () => undefined,
    });
    this.lastRevision = this.kv.currentRevision();
    // A watcher over the whole scratch keyspace with prev_kv, as a client watching a prefix holds.
    this.stream = this.watchable.watchStream();
    this.stream.watch({ key: Buffer.from([0]), rangeEnd: Buffer.from([0]), prevKv: true });
    this.stream.setHandler((resp) => {
      for (const ev of resp.events) if (ev.kv !== undefined) this.counts.watchEvents++;
    });
  }

  /** A scratch store in a new temporary directory. */
  static open(): ScratchStore {
    const dir = mkdtempSync(join(tmpdir(), "etcetera-warmup-"));
    try {
      return new ScratchStore(dir);
    } catch (err) {
      rmSync(dir, { recursive: true, force: true });
      throw err;
    }
  }

  /**
   * Applies committed entries as the member's apply does. Each must be a put or a txn whose
   * success branch puts: each raises the revision by one, so a wrong revision is a broken path.
   */
  apply(entries: readonly Entry[]): void {
    check(!this.closed, "apply on a closed scratch store");
    for (const e of entries) {
      // The scratch raft's bootstrap conf changes are not the scratch store's: it has no members.
      if (e.type !== EntryType.Normal) continue;
      if (e.data.byteLength === 0) {
        this.applier.apply(e); // a new leader's empty entry
        continue;
      }
      const r = this.applier.apply(e);
      check(r !== undefined && r.outcome.error === undefined, `scratch apply of entry ${e.index} failed: ${String(r?.outcome.error)}`);
      check(r!.outcome.revision === this.lastRevision + 1, `scratch apply of entry ${e.index}: revision ${r!.outcome.revision}, expected ${this.lastRevision + 1}`);
      this.lastRevision = r!.outcome.revision;
      this.counts.applied++;
    }
  }

  /** A serializable range of one key through the store's sliced read (the Range handler's path). */
  async range(key: Uint8Array): Promise<void> {
    const r = await this.kv.rangeAsync({ key, serializable: true });
    check(r.kvs.length === 1 && Buffer.compare(r.kvs[0]!.key, key) === 0, "scratch range");
    this.counts.ranges++;
  }

  /** The store's current revision. */
  revision(): number {
    return this.kv.currentRevision();
  }

  /** Closes the stores and removes the scratch directory. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    try {
      this.stream.close();
      this.watchable.close();
      this.tokens.close();
      this.kv.close();
      this.backend.close();
    } finally {
      rmSync(this.dir, { recursive: true, force: true });
    }
  }
}
