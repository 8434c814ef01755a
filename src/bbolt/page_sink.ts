/**
 * Where the writer's pages go. Data pages arrive in page-id order (page 2 first) in chunks of
 * consecutive pages; the two meta pages (0 and 1) arrive last, once the tree's root is known.
 */

import fs from "node:fs";

export interface PageSink {
  /** Consecutive pages starting at file offset `offset` (ascending, no gaps, from page 2 on). */
  write(offset: number, bytes: Uint8Array): void;
  /** Pages 0 and 1, written when everything else is. */
  writeMeta(bytes: Uint8Array): void;
}

/** Writes a file with positioned writes; the meta pages go to offset 0 last. */
export class FilePageSink implements PageSink {
  readonly path: string;
  private fd: number | undefined;

  constructor(path: string) {
    this.path = path;
    this.fd = fs.openSync(path, "w");
  }

  private writeAt(offset: number, bytes: Uint8Array): void {
    if (this.fd === undefined) throw new Error(`bbolt writer ${this.path}: write after close`);
    let done = 0;
    while (done < bytes.length) done += fs.writeSync(this.fd, bytes, done, bytes.length - done, offset + done);
  }

  write(offset: number, bytes: Uint8Array): void {
    this.writeAt(offset, bytes);
  }

  writeMeta(bytes: Uint8Array): void {
    this.writeAt(0, bytes);
  }

  /** fsync (when asked) and close. */
  close(options: { sync?: boolean } = {}): void {
    if (this.fd === undefined) return;
    try {
      if (options.sync) fs.fsyncSync(this.fd);
    } finally {
      fs.closeSync(this.fd);
      this.fd = undefined;
    }
  }
}

/** Keeps the whole file in memory (tests, small files). */
export class BufferPageSink implements PageSink {
  private readonly parts: { offset: number; bytes: Uint8Array }[] = [];

  write(offset: number, bytes: Uint8Array): void {
    this.parts.push({ offset, bytes: Uint8Array.from(bytes) });
  }

  writeMeta(bytes: Uint8Array): void {
    this.parts.push({ offset: 0, bytes: Uint8Array.from(bytes) });
  }

  /** The file as written so far. */
  bytes(): Uint8Array {
    const size = this.parts.reduce((m, p) => Math.max(m, p.offset + p.bytes.length), 0);
    const out = new Uint8Array(size);
    for (const p of this.parts) out.set(p.bytes, p.offset);
    return out;
  }
}
