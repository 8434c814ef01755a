/**
 * Prepares the next segment file in the background (etcd's filePipeline), so that a cut only
 * renames an already zero-filled and synced file instead of writing 64 MiB of zeros while
 * proposals wait. Files are `<n>.tmp` in the WAL dir; leftovers from a crash are removed on open.
 */
import fs from "node:fs";
import path from "node:path";
import { writeZeros } from "./segment.js";

export interface PreparedFile {
  path: string;
  fh: fs.promises.FileHandle;
}

export class SegmentPipeline {
  private count = 0;
  private next: Promise<PreparedFile> | undefined;

  constructor(
    private readonly dir: string,
    private readonly sizeBytes: number,
  ) {}

  /** The next prepared file; starts preparing the one after it. */
  async take(): Promise<PreparedFile> {
    const ready = this.next ?? this.prepare();
    this.next = undefined;
    const file = await ready;
    this.start();
    return file;
  }

  /** Starts preparing a file now (called once the WAL is open). */
  start(): void {
    if (this.next) return;
    const p = this.prepare();
    // A failure surfaces in take(); never as an unhandled rejection.
    p.catch(() => {});
    this.next = p;
  }

  async close(): Promise<void> {
    const pending = this.next;
    this.next = undefined;
    if (!pending) return;
    try {
      const f = await pending;
      await f.fh.close();
      await fs.promises.rm(f.path, { force: true });
    } catch {
      // The file was never usable; nothing to release.
    }
  }

  private async prepare(): Promise<PreparedFile> {
    const file = path.join(this.dir, `${this.count++ % 2}.tmp`);
    const fh = await fs.promises.open(file, "w+");
    try {
      await writeZeros(fh, 0, this.sizeBytes);
      await fh.datasync();
    } catch (err) {
      await fh.close();
      throw err;
    }
    return { path: file, fh };
  }
}

/** Removes `*.tmp` files left by a crash during segment preparation. */
export function removeStaleTmpFiles(dir: string): void {
  for (const f of fs.readdirSync(dir)) if (f.endsWith(".tmp")) fs.rmSync(path.join(dir, f), { force: true });
}
