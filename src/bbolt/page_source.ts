/**
 * Where the reader's bytes come from: an open file read with positioned reads (pages on demand,
 * so memory stays bounded by the pages in use, not the file size), or a buffer already in memory.
 */

import fs from "node:fs";
import { BoltFormatError } from "./errors.js";

export interface PageSource {
  /** File path or buffer label, used in every error. */
  readonly name: string;
  readonly sizeBytes: number;
  /** Exactly `length` bytes at `offset` (a fresh copy or an immutable view); throws past the end. */
  read(offset: number, length: number, pgid: number | undefined): Uint8Array;
  close(): void;
}

function checkRange(src: PageSource, offset: number, length: number, pgid: number | undefined): void {
  if (offset < 0 || length < 0 || offset + length > src.sizeBytes) {
    throw new BoltFormatError(
      src.name,
      pgid,
      offset,
      `file truncated: ${length} bytes needed at offset ${offset}, the file has ${src.sizeBytes}`,
    );
  }
}

export class FilePageSource implements PageSource {
  readonly name: string;
  readonly sizeBytes: number;
  private fd: number | undefined;

  private constructor(name: string, fd: number, sizeBytes: number) {
    this.name = name;
    this.fd = fd;
    this.sizeBytes = sizeBytes;
  }

  /** `lengthBytes` limits the source to a prefix (a snapshot's bbolt part, before etcd's SHA-256). */
  static open(path: string, lengthBytes?: number): FilePageSource {
    const fd = fs.openSync(path, "r");
    try {
      const size = fs.fstatSync(fd).size;
      return new FilePageSource(path, fd, lengthBytes === undefined ? size : Math.min(size, lengthBytes));
    } catch (err) {
      fs.closeSync(fd);
      throw err;
    }
  }

  read(offset: number, length: number, pgid: number | undefined): Uint8Array {
    checkRange(this, offset, length, pgid);
    if (this.fd === undefined) throw new Error(`bbolt ${this.name}: read after close`);
    const buf = Buffer.allocUnsafe(length);
    let done = 0;
    while (done < length) {
      const n = fs.readSync(this.fd, buf, done, length - done, offset + done);
      if (n === 0) {
        throw new BoltFormatError(this.name, pgid, offset + done, `file shrank while reading: end of file at ${offset + done}`);
      }
      done += n;
    }
    return buf;
  }

  close(): void {
    if (this.fd !== undefined) fs.closeSync(this.fd);
    this.fd = undefined;
  }
}

export class BufferPageSource implements PageSource {
  readonly name: string;
  readonly sizeBytes: number;
  private readonly bytes: Uint8Array;

  constructor(bytes: Uint8Array, name = "<buffer>") {
    this.bytes = bytes;
    this.name = name;
    this.sizeBytes = bytes.length;
  }

  read(offset: number, length: number, pgid: number | undefined): Uint8Array {
    checkRange(this, offset, length, pgid);
    return this.bytes.subarray(offset, offset + length);
  }

  close(): void {}
}
