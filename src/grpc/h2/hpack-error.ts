/** A header block that is not valid HPACK: HTTP/2's COMPRESSION_ERROR, fatal to the connection. */
export class HpackError extends Error {
  constructor(message: string) {
    super(`HPACK: ${message}`);
    this.name = "HpackError";
  }
}
