/**
 * The one error a bbolt file is refused with. It names the file, the page and the byte offset
 * where the reader found the problem, so a corrupt snapshot or data dir can be located with a
 * hex dump instead of guessed at.
 */

export class BoltFormatError extends Error {
  /** File path (or the label of an in-memory buffer). */
  readonly file: string;
  /** Page id the problem is in, or undefined when it is about the file as a whole. */
  readonly pgid: number | undefined;
  /** Absolute byte offset in the file where the bad field starts. */
  readonly offset: number;
  /** What is wrong, without the location. */
  readonly reason: string;

  constructor(file: string, pgid: number | undefined, offset: number, reason: string) {
    const where = pgid === undefined ? `byte offset ${offset}` : `page ${pgid} (byte offset ${offset})`;
    super(`bbolt ${file}: ${where}: ${reason}`);
    this.name = "BoltFormatError";
    this.file = file;
    this.pgid = pgid;
    this.offset = offset;
    this.reason = reason;
  }
}

/** Thrown by the writer when its caller breaks an input rule (order, sizes); never a file problem. */
export class BoltWriterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "BoltWriterError";
  }
}
