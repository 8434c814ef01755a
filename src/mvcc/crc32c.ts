/** CRC-32C (Castagnoli), the checksum etcd uses for its hashes. Table driven, incremental. */

const TABLE = (() => {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
})();

export class Crc32c {
  private crc = 0xffffffff;

  update(data: Uint8Array): this {
    let c = this.crc;
    for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
    this.crc = c;
    return this;
  }

  digest(): number {
    return (this.crc ^ 0xffffffff) >>> 0;
  }
}

export function crc32c(data: Uint8Array): number {
  return new Crc32c().update(data).digest();
}

/** Go's crc32.Update(crc, castagnoliTable, data): a finished checksum continued over more bytes (etcd's WAL chains records so). */
export function crc32cUpdate(crc: number, data: Uint8Array): number {
  let c = ~crc >>> 0;
  for (let i = 0; i < data.length; i++) c = TABLE[(c ^ data[i]!) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}
