/**
 * The backend (etcd's mvcc/backend): one SQLite database (better-sqlite3) for every store of a
 * member. The server opens it, commits it and restores it; each store (mvcc's kv and meta, the
 * lessor, membership, alarms) registers its own tables and writes through the one counted handle
 * the backend gives it (BatchTx).
 *
 * Like etcd's batched bolt transaction, writes go into one open SQLite transaction that is
 * committed every `batchIntervalMs` or once `batchLimit` writes are pending (checked between
 * applies, never inside one). Reads use the same connection, so they see every applied write,
 * committed or not.
 *
 * Durability (issue 20). The Raft WAL is the source of durability: what SQLite loses in a crash is
 * re-applied from the consistent index, written in the same transaction as the data it covers.
 * That holds only if (1) a power cut never leaves the file malformed and (2) the backend is durable
 * up to index N before the Raft WAL releases anything at or below N. The cheapest scheme that
 * gives both:
 * - journal_mode=WAL, synchronous=NORMAL: a commit is not fsynced (it may roll back in a power
 *   cut; the Raft WAL re-applies it), but SQLite fsyncs its -wal before every checkpoint and the
 *   database file after it, so a cut leaves a consistent database at some earlier commit. OFF
 *   (as before) fsyncs nothing: a checkpoint could overwrite database pages and restart the -wal
 *   with neither on disk, and a cut left the file malformed or empty.
 * - at each raft snapshot, `sync()`: commit, then fsync the -wal, the database file and their
 *   directory before the snapshot marker is written and any WAL segment released. The fsyncs
 *   are plain fsyncs of the files SQLite wrote (on libuv's thread pool, off the event loop), no
 *   checkpoint: a checkpoint would copy every page of the -wal into the file synchronously, on the
 *   event loop (better-sqlite3 is synchronous). Why an outside fsync is enough: the -wal holds a
 *   checksummed chain of frames, so once its bytes up to the last commit are on disk that commit
 *   is recoverable; frames are overwritten only after a complete checkpoint, which under NORMAL
 *   has already fsynced the database file holding them.
 * - checkpoints run on a worker thread (checkpointer.ts), never inside a commit on the event loop
 *   (SQLite's automatic checkpoint is off on the main connection): their fsyncs stay off it too.
 *
 * A snapshot restore replaces the file and hands every registered store a new handle, in the
 * order they registered (etcd restores lease, then mvcc, then alarms, auth and membership).
 */
import fs from "node:fs";
import { dirname } from "node:path";
import Database from "better-sqlite3";
import { BatchTx } from "./batch_tx.js";
import { vacuumInWorker } from "./vacuum_worker.js";
import { Checkpointer, type CheckpointResult } from "./checkpointer.js";
import { writeImageInWorker } from "./image_worker.js";
import { invariant } from "./errors.js";

export interface BackendOptions {
  /** Commit the batch transaction at least this often. etcd: 100 ms. */
  batchIntervalMs?: number;
  /** Commit once this many writes are pending. etcd: 10,000. */
  batchLimit?: number;
  /**
   * Told when a restore could not checkpoint the old file completely, or the checkpointer worker
   * failed and the main connection checkpoints again (for the member's log).
   */
  onIncompleteCheckpoint?: (message: string) => void;
  /** Durations of commits, snapshots and defrags (etcd_disk_backend_*_duration_seconds). */
  timings?: BackendTimings;
  /** The -wal is cut back to this after a complete checkpoint. Default WAL_SIZE_LIMIT_BYTES. */
  walSizeLimitBytes?: number;
  /**
   * The -wal was past its limit and this connection checkpointed it between two batches
   * (`complete`: the next batch starts it over; not complete while a reader holds old frames).
   */
  onWalCheckpoint?: (e: { walBytes: number; complete: boolean; frames: number; tookMs: number }) => void;
}

/** Where the backend reports how long its operations took, in seconds. */
export interface BackendTimings {
  /** One batch commit (etcd: backend commit, what its dashboard calls "DB fsync"). */
  commit(seconds: number): void;
  /** One read of the whole file in a read transaction (a client's Maintenance.Snapshot). */
  snapshot(seconds: number): void;
  /** One defragmentation; `inflight` brackets it (etcd_disk_defrag_inflight). */
  defrag(seconds: number): void;
  defragInflight(active: boolean): void;
}

/** A store living in the backend. */
export interface BackendStore {
  /** For messages. */
  readonly name: string;
  /** CREATE TABLE IF NOT EXISTS statements for the store's tables; run before every recover. */
  readonly schema: string;
  /**
   * The backend is open on a (new) file: prepare statements on `tx` and load the state the file
   * holds. Called when the store registers and again after every snapshot restore.
   */
  recover(tx: BatchTx): void;
  /**
   * A received image is about to replace the file (installImage): work the next recover would
   * do synchronously over the whole image (the key index) can be done here first, yielding to
   * the event loop, from the image file (read-only; it is not yet in place). Optional.
   */
  prepareInstall?(imagePath: string): Promise<void>;
  /**
   * Runs inside the batch transaction right before every commit (etcd's OnPreCommitUnsafe): the
   * place to write state, like the consistent index, that must land atomically with the batch
   * but need not be written per change.
   */
  preCommit?(): void;
}

/** The page cache while a delta is applied (applyInPlace), in KiB as SQLite's negative cache_size. */
const APPLY_CACHE_KIB = -1024;

/**
 * What a complete checkpoint leaves of the -wal: SQLite cuts it back to this on the next commit.
 * Without a limit it keeps its high-water mark for good (a reader held open across a burst, a
 * client's snapshot stream of a 2 GiB backend, grows it to gigabytes). Far above the -wal of a
 * steady write load (its 1,000-frame checkpoint threshold, about 4 MiB), so no commit pays to
 * extend the file again; only a burst's excess is given back.
 */
const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

interface PageCounts {
  pageSize: number;
  pages: number;
  free: number;
}

function pagesBytes(p: PageCounts): number {
  return p.pageSize * p.pages;
}

export class Backend {
  readonly path: string;
  private db: Database.Database;
  private tx: BatchTx;
  private readonly stores: BackendStore[] = [];
  private readonly batchLimit: number;
  private readonly onIncompleteCheckpoint: ((message: string) => void) | undefined;
  private readonly timings: BackendTimings | undefined;
  private pending = 0;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;
  private begin!: Database.Statement;
  private commit!: Database.Statement;
  private readonly checkpointer: Checkpointer;
  /** The checkpointer failed: the main connection checkpoints automatically, as SQLite does. */
  private autoCheckpoint = false;
  /** A VACUUM runs on a worker (defragmentOffThread): the backend is held, nothing may write it. */
  private defragging = false;
  /** A received delta is being applied in its own transaction (applyInPlace): nothing else may write or commit. */
  private applyingInPlace = false;
  private lastPageCounts: PageCounts = { pageSize: 4096, pages: 0, free: 0 };
  private readonly walSizeLimitBytes: number;
  /** restartWalIfLarge: idle, a worker checkpoint asked for, or answered (this connection's turn). */
  private walRestart: "idle" | "asked" | "ready" = "idle";
  private readonly onWalCheckpoint: BackendOptions["onWalCheckpoint"];

  private constructor(path: string, opts: BackendOptions) {
    this.path = path;
    this.walSizeLimitBytes = opts.walSizeLimitBytes ?? WAL_SIZE_LIMIT_BYTES;
    invariant(Number.isSafeInteger(this.walSizeLimitBytes) && this.walSizeLimitBytes >= 0, `walSizeLimitBytes ${this.walSizeLimitBytes}`);
    this.batchLimit = opts.batchLimit ?? 10_000;
    this.onIncompleteCheckpoint = opts.onIncompleteCheckpoint;
    this.onWalCheckpoint = opts.onWalCheckpoint;
    this.timings = opts.timings;
    invariant(this.batchLimit > 0, "batchLimit must be positive");
    this.db = this.connect();
    this.tx = this.newTx();
    this.checkpointer = new Checkpointer({
      path,
      onError: (message) => {
        this.autoCheckpoint = true;
        if (!this.closed) this.db.pragma("wal_autocheckpoint = 1000");
        this.onIncompleteCheckpoint?.(`${message}; the main connection checkpoints automatically from now on`);
      },
    });
    const interval = opts.batchIntervalMs ?? 100;
    invariant(interval > 0, "batchIntervalMs must be positive");
    this.timer = setInterval(() => this.commitIfPending(), interval);
    this.timer.unref();
  }

  static open(path: string, opts: BackendOptions = {}): Backend {
    return new Backend(path, opts);
  }

  /** Opens the file with the settings every connection gets and begins the batch transaction. */
  private connect(): Database.Database {
    const db = new Database(this.path);
    db.pragma("journal_mode = WAL");
    db.pragma("synchronous = NORMAL"); // see the file comment (durability)
    db.pragma(`wal_autocheckpoint = ${this.autoCheckpoint ? 1000 : 0}`); // checkpointer.ts
    db.pragma(`journal_size_limit = ${this.walSizeLimitBytes}`);
    this.begin = db.prepare("BEGIN");
    this.commit = db.prepare("COMMIT");
    this.begin.run();
    return db;
  }

  private newTx(): BatchTx {
    const db = this.db;
    return new BatchTx(
      db,
      (n) => {
        invariant(db === this.db, "write through the handle of a replaced connection");
        this.pending += n;
      },
      () => {
        invariant(!this.defragging, "write to the backend while a defrag holds it");
        invariant(!this.applyingInPlace, "write to the backend while a delta is applied to it");
      },
    );
  }

  /**
   * Adds a store: its tables are created if missing (committed at once, outside the batch) and it
   * loads its state now.
   */
  register(store: BackendStore): void {
    invariant(!this.closed, "backend is closed");
    invariant(!this.stores.some((s) => s.name === store.name), `store ${store.name} registered twice`);
    this.commitBatch();
    this.tx.ensureSchema(store.schema);
    this.begin.run();
    this.stores.push(store);
    store.recover(this.tx);
  }

  /**
   * The bare connection, for tools and tests that inspect the file. Stores write through the
   * handle they are given (BatchTx), so that every write is counted.
   */
  get connection(): Database.Database {
    return this.db;
  }

  // ---- batching

  /** Called between applies: commits when the batch is full. */
  commitIfFull(): void {
    if (this.pending >= this.batchLimit) this.forceCommit();
  }

  private commitIfPending(): void {
    if (this.defragging || this.applyingInPlace) return; // the batch resumes after the VACUUM (defragmentOffThread) or the delta
    if (!this.closed && this.pending > 0) this.forceCommit();
    if (!this.closed && !this.checkpointer.running) this.checkpointer.maybeStart(fileBytes(`${this.path}-wal`));
  }

  /** Commits the batch transaction now and opens the next one. */
  forceCommit(): void {
    this.commitBatch();
    this.restartWalIfLarge();
    this.begin.run();
  }

  /**
   * SQLite starts the -wal over only in a write transaction that began reading when every frame
   * was already in the database file. The batch is open all the time and reads at once, so the
   * worker's checkpoints finish inside a batch that then appends: under a steady write load the
   * -wal rarely started over (127 MB of -wal beside a 116 MB file after 400k puts, and it kept
   * that size idle). Once it passes its limit, the worker checkpoints the bulk first; at a later
   * commit this connection checkpoints what is left, about one batch, between two batches, so
   * the next batch starts the -wal over and its commit cuts the file back to the limit.
   */
  private restartWalIfLarge(): void {
    const walBytes = fileBytes(`${this.path}-wal`);
    if (walBytes <= this.walSizeLimitBytes) {
      this.walRestart = "idle";
      return;
    }
    if (this.walRestart === "asked") return;
    if (this.walRestart === "idle") {
      this.walRestart = "asked";
      const ready = (): void => {
        if (this.walRestart === "asked") this.walRestart = "ready";
      };
      this.checkpointer.checkpoint().then(ready, ready);
      return;
    }
    const startMs = performance.now();
    const [r] = this.db.pragma("wal_checkpoint(PASSIVE)") as CheckpointResult[];
    invariant(r !== undefined, "wal_checkpoint returned no row");
    this.walRestart = "idle";
    this.onWalCheckpoint?.({ walBytes, complete: r.busy === 0 && r.log === r.checkpointed, frames: r.log, tookMs: performance.now() - startMs });
  }

  /** Commits the batch without opening the next one. */
  private commitBatch(): void {
    invariant(!this.closed, "backend is closed");
    invariant(!this.defragging, "commit while a defrag holds the backend");
    invariant(!this.applyingInPlace, "commit while a delta is applied to the backend");
    invariant(this.db.inTransaction, "batch transaction must be open");
    const startMs = this.timings === undefined ? 0 : performance.now();
    for (const s of this.stores) s.preCommit?.();
    this.commit.run();
    this.pending = 0;
    this.timings?.commit((performance.now() - startMs) / 1000);
  }

  /**
   * Commits the batch and makes every write applied so far durable (see the file comment): the
   * -wal, the database file and their directory (for a file just created) are fsynced. Callers
   * release Raft WAL entries up to the consistent index only after this resolves.
   */
  async sync(): Promise<void> {
    this.forceCommit();
    const db = this.db;
    for (const f of [`${this.path}-wal`, this.path]) await fsyncFile(f);
    await fsyncFile(dirname(this.path));
    invariant(db === this.db, "backend restored while it was being synced");
  }

  // ---- whole-file operations

  /**
   * Runs `use` on a second, read-only connection holding one read transaction over the committed
   * state (WAL snapshot isolation): it sees every write applied so far (the batch is committed
   * first) and nothing after, however long `use` takes, while applies continue on the main
   * connection. The connection is closed when `use` settles.
   */
  async withReadTransaction<T>(use: (db: Database.Database) => Promise<T>): Promise<T> {
    const startMs = performance.now();
    try {
      return await this.readTransaction(use);
    } finally {
      this.timings?.snapshot((performance.now() - startMs) / 1000);
    }
  }

  private async readTransaction<T>(use: (db: Database.Database) => Promise<T>): Promise<T> {
    this.forceCommit();
    const reader = new Database(this.path, { readonly: true });
    try {
      reader.exec("BEGIN");
      reader.prepare("SELECT count(*) FROM sqlite_master").get(); // starts the read transaction now
      const result = await use(reader);
      reader.exec("COMMIT");
      return result;
    } finally {
      reader.close();
    }
  }

  /**
   * Writes the committed state, at one point, as a new SQLite file at `destPath` (the image a
   * leader sends to a follower far behind), without blocking the event loop: the batch is
   * committed here, then a worker thread, on a read-only connection of its own, runs
   * `VACUUM INTO destPath` (snapshotImage.ts).
   *
   * Why not the bytes of the file under a read transaction: in WAL mode the committed state is
   * the database file plus frames of its -wal, and the main connection's checkpoints write into
   * the file meanwhile, so no byte range of the file alone is one consistent point. VACUUM INTO
   * and SQLite's backup API both read through one read transaction (WAL snapshot isolation: every
   * write committed before it, nothing after, while applies continue on the main connection), so
   * either is consistent; but both write the image synchronously, and the backup API's last step
   * fsyncs the whole image (measured here: 0.4 s for 200 MiB), and even page-sized slices of
   * writes stall for tens of ms when the kernel throttles dirty pages. In a worker, none of that
   * is on the event loop. VACUUM INTO also leaves the image compact (no free pages to send).
   */
  async snapshot(destPath: string): Promise<void> {
    this.forceCommit();
    await writeImageInWorker(this.path, destPath);
  }

  /**
   * Replaces the whole database with a snapshot file (etcd's applySnapshot: a new backend), then
   * every store recovers from it, in the order they registered. The same object stays valid.
   * The file is copied (it stays where it is); installImage moves it instead.
   */
  restore(snapshotPath: string): void {
    this.replaceFile(snapshotPath, "copy");
  }

  /**
   * Like restore, for a member installing a received image: the image file is renamed into place
   * (it is consumed), never copied, and the old file is made durable first off the event loop
   * (sync()), so the synchronous part is a checkpoint of a -wal already fsynced, two renames and
   * directory fsyncs, and the stores' recovery: no step proportional to the database's size (the
   * key index is rebuilt from the image beforehand, in slices: BackendStore.prepareInstall).
   */
  async installImage(imagePath: string): Promise<void> {
    for (const s of this.stores) await s.prepareInstall?.(imagePath);
    await this.sync();
    // The -wal checkpointed off the event loop, and the worker's connection closed: it must not
    // stay open on the replaced file (it starts again on the new one when its -wal grows).
    await this.checkpointer.checkpoint();
    await this.checkpointer.stop();
    this.replaceFile(imagePath, "move");
  }

  /**
   * Applies a received delta to the file in place (Snapshots.install of an incremental snapshot):
   * the batch is committed, then `write` runs in one transaction of its own on the main
   * connection (BEGIN IMMEDIATE ... COMMIT, or ROLLBACK when it throws), so a crash or power cut
   * leaves the delta applied whole or not at all. `write` yields to the event loop between its
   * pages; meanwhile nothing else may write or commit (an invariant refuses it; the batch timer
   * waits, and KvStore's compaction waits on applyInProgress), and reads on the main connection
   * see the old rows plus rows no index points at yet. Then the stores recover from the file as
   * after a restore: the key index rebuilt a page at a time first (prepareInstall on the file
   * itself, a read-only connection of its own), adopted by the recovery. Durability is the
   * caller's: sync() after.
   */
  async applyInPlace(write: (db: Database.Database) => Promise<void>): Promise<void> {
    invariant(!this.closed, "backend is closed");
    invariant(!this.defragging && !this.applyingInPlace, "delta applied while the backend is held");
    this.commitBatch();
    this.applyingInPlace = true;
    const db = this.db;
    // A small page cache while the delta is written: SQLite spills dirty pages to the -wal as the
    // pages go (uncommitted frames), so the COMMIT writes at most this much on the event loop
    // (with the default 8 MiB cache it wrote up to 8 MiB: ~55 ms measured for a 10 MiB delta).
    const cacheSize = db.pragma("cache_size", { simple: true }) as number;
    try {
      db.pragma(`cache_size = ${APPLY_CACHE_KIB}`);
      db.exec("BEGIN IMMEDIATE");
      try {
        await write(db);
        invariant(db === this.db, "backend replaced while a delta was applied to it");
        db.exec("COMMIT");
      } catch (e) {
        if (db.inTransaction) db.exec("ROLLBACK");
        throw e;
      }
      for (const s of this.stores) await s.prepareInstall?.(this.path);
    } finally {
      db.pragma(`cache_size = ${cacheSize}`);
      this.applyingInPlace = false;
      this.begin.run();
    }
    for (const s of this.stores) {
      this.tx.ensureSchema(s.schema);
      s.recover(this.tx);
    }
  }

  /** Whether a delta is being applied (applyInPlace in progress): background writers wait. */
  get applyInProgress(): boolean {
    return this.applyingInPlace;
  }

  private replaceFile(snapshotPath: string, how: "copy" | "move"): void {
    this.checkpointer.detach(); // stopped already by installImage; restore is synchronous
    this.commitBatch();
    // The old database complete in its own file and on disk, so its -wal can go before the new
    // file is renamed in (a -wal left beside the new file would be replayed into it). A reader
    // still open (a client's snapshot stream) can keep the checkpoint from copying every frame:
    // then a cut before the rename is durable may leave the old file without frames it needed;
    // the member restarts behind the snapshot marker and installs the staged image again.
    // PASSIVE: copies every frame it may without waiting (TRUNCATE would block the event loop for
    // the busy timeout on such a reader); the -wal is removed, not reused, so no reset is needed.
    const [ckpt] = this.db.pragma("wal_checkpoint(PASSIVE)") as { busy: number; log: number; checkpointed: number }[];
    if (ckpt === undefined || ckpt.log !== ckpt.checkpointed) {
      this.onIncompleteCheckpoint?.(`the -wal of ${this.path} was not fully checkpointed before the restore (a reader is open): ${JSON.stringify(ckpt)}`);
    }
    fsyncFileSync(this.path);
    this.db.close();
    installSnapshotFile(snapshotPath, this.path, how);
    this.db = this.connect();
    this.tx = this.newTx();
    for (const s of this.stores) {
      this.tx.ensureSchema(s.schema);
      s.recover(this.tx);
    }
  }

  /**
   * The database's size: all its pages, free ones included (etcd: bolt's high-water page times
   * its page size, what the quota and etcd_mvcc_db_total_size_in_bytes count). Not the files: the
   * database file lags until a checkpoint copies the -wal's frames into it, and the -wal keeps its
   * high-water mark after every checkpoint (file + -wal read 63.5 MB for 31 MB of pages after a
   * burst, and took the quota's NOSPACE twice as early).
   */
  sizeBytes(): number {
    return pagesBytes(this.pageCounts());
  }

  /** Rewrites the file without free pages (VACUUM), blocking like etcd's defrag. */
  defragment(): { sizeBeforeBytes: number; sizeAfterBytes: number } {
    const startMs = performance.now();
    this.timings?.defragInflight(true);
    try {
      this.commitBatch();
      this.db.pragma("wal_checkpoint(TRUNCATE)");
      const sizeBeforeBytes = this.sizeBytes();
      this.db.exec("VACUUM");
      this.db.pragma("wal_checkpoint(TRUNCATE)");
      const sizeAfterBytes = this.sizeBytes();
      this.begin.run();
      return { sizeBeforeBytes, sizeAfterBytes };
    } finally {
      this.timings?.defragInflight(false);
      this.timings?.defrag((performance.now() - startMs) / 1000);
    }
  }

  /**
   * Like defragment, with the VACUUM on a worker thread (vacuum_worker.ts), so the event loop runs
   * meanwhile. The backend is held until it resolves, as etcd's defrag holds its batch tx: the
   * batch is committed first, no transaction stays open on the main connection, the checkpointer
   * is stopped (it restarts lazily after), and any write or commit meanwhile fails an invariant.
   * The caller keeps applies and backend reads waiting until this settles.
   */
  async defragmentOffThread(): Promise<{ sizeBeforeBytes: number; sizeAfterBytes: number }> {
    invariant(!this.defragging, "defrag already in progress");
    const startMs = performance.now();
    this.timings?.defragInflight(true);
    try {
      this.commitBatch();
      this.defragging = true;
      try {
        await this.checkpointer.stop();
        this.db.pragma("wal_checkpoint(TRUNCATE)");
        const sizeBeforeBytes = pagesBytes(this.readPageCounts());
        const db = this.db;
        const ckpt = await vacuumInWorker(this.path);
        invariant(db === this.db, "backend restored while it was being defragmented");
        if (ckpt.busy !== 0 || ckpt.log !== ckpt.checkpointed) {
          this.onIncompleteCheckpoint?.(`the -wal of ${this.path} was not fully checkpointed after the defrag: ${JSON.stringify(ckpt)}`);
        }
        return { sizeBeforeBytes, sizeAfterBytes: pagesBytes(this.readPageCounts()) };
      } finally {
        this.defragging = false;
        if (!this.closed) this.begin.run();
      }
    } finally {
      this.timings?.defragInflight(false);
      this.timings?.defrag((performance.now() - startMs) / 1000);
    }
  }

  /** Whether a defrag holds the backend (defragmentOffThread in progress). */
  get defragInProgress(): boolean {
    return this.defragging;
  }

  /** Bytes of the database in use: its pages less the free ones (etcd: size in use). */
  sizeInUseBytes(): number {
    const p = this.pageCounts();
    return p.pageSize * (p.pages - p.free);
  }

  /**
   * The main connection's view of the database's pages (its open batch included). While a VACUUM
   * holds the file on a worker, or once closed, the last counts read: the connection must not
   * start a read then.
   */
  private pageCounts(): PageCounts {
    return this.closed || this.defragging ? this.lastPageCounts : this.readPageCounts();
  }

  private readPageCounts(): PageCounts {
    const pageSize = this.db.pragma("page_size", { simple: true }) as number;
    const pages = this.db.pragma("page_count", { simple: true }) as number;
    const free = this.db.pragma("freelist_count", { simple: true }) as number;
    invariant(pageSize > 0 && pages >= 0 && free >= 0 && free <= pages, `page counts of ${this.path}: ${pages} pages of ${pageSize} bytes, ${free} free`);
    this.lastPageCounts = { pageSize, pages, free };
    return this.lastPageCounts;
  }

  close(): void {
    if (this.closed) return;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.checkpointer.detach();
    this.commitBatch();
    this.readPageCounts(); // what sizeBytes answers from now on
    this.closed = true;
    this.db.close();
  }

  /** Test hook: drop the connection without committing, as a crash would. */
  crashForTest(): void {
    if (this.closed) return;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.checkpointer.detach();
    this.closed = true;
    this.db.close(); // closing with an open transaction rolls it back
  }

  /**
   * Resolves once the checkpointer's worker, asked to close by close(), has exited: a process
   * that exits with it still open ends it the way a terminate would (checkpointer.ts).
   */
  async workersExited(): Promise<void> {
    await this.checkpointer.drained();
  }

  get isClosed(): boolean {
    return this.closed;
  }
}

/**
 * Replaces the database at `dbPath` with a snapshot file (its connection must be closed, the file
 * checkpointed and synced). Crash-safe: the old -wal and -shm go first (the directory fsynced),
 * then the new file, durable under another name, is renamed over the database and the directory
 * fsynced, so a power cut leaves the old file or the new one whole (the rename is atomic), never
 * a -wal of one beside the other. A member whose cut kept the old file starts behind the snapshot
 * and installs the staged image again (Snapshots.recoverAtStart). "copy" writes and fsyncs a copy
 * under a temporary name first; "move" renames the snapshot file itself, which must already be
 * fsynced and in the same directory (a received image is, see Snapshots.receive).
 */
function installSnapshotFile(snapshotPath: string, dbPath: string, how: "copy" | "move"): void {
  for (const suffix of ["-wal", "-shm"]) fs.rmSync(`${dbPath}${suffix}`, { force: true });
  fsyncFileSync(dirname(dbPath));
  let source = snapshotPath;
  if (how === "copy") {
    source = `${dbPath}.installing`;
    fs.rmSync(source, { force: true });
    fs.copyFileSync(snapshotPath, source);
    fsyncFileSync(source);
  } else {
    invariant(dirname(snapshotPath) === dirname(dbPath), `a moved snapshot image must be in the database's directory: ${snapshotPath}`);
  }
  fs.renameSync(source, dbPath);
  fsyncFileSync(dirname(dbPath));
}

/** A file's size, 0 when it is absent (a -wal is absent until the first write). */
function fileBytes(path: string): number {
  try {
    return fs.statSync(path).size;
  } catch {
    return 0;
  }
}

/** fsync a file or a directory, if it exists (a -wal is absent until the first write). */
async function fsyncFile(path: string): Promise<void> {
  let fh: fs.promises.FileHandle;
  try {
    fh = await fs.promises.open(path, "r");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

function fsyncFileSync(path: string): void {
  let fd: number;
  try {
    fd = fs.openSync(path, "r");
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return;
    throw e;
  }
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
