/**
 * The one error an etcd WAL segment or `.snap` file is refused with: the file and the byte offset
 * where the reader found the problem, so a torn or corrupt data dir can be located with a hex dump.
 */
export class EtcdFileError extends Error {
  readonly file: string;
  /** Absolute byte offset in the file where the bad record or field starts. */
  readonly offset: number;
  readonly reason: string;

  constructor(file: string, offset: number, reason: string) {
    super(`${file}: byte offset ${offset}: ${reason}`);
    this.name = "EtcdFileError";
    this.file = file;
    this.offset = offset;
    this.reason = reason;
  }
}
