/**
 * CRC-32 (IEEE, zlib's) of a byte range, for the WAL's record headers: 8 and 12 bytes per record,
 * where a call to node:zlib's crc32 (and the subarray it needs) cost more than the table loop.
 * Payloads keep using node:zlib. Same value as `zlib.crc32(buf.subarray(start, end), value)`
 * (test/wal/crc32_range.test.ts).
 */
import { assert } from "./errors.js";

const TABLE = (() => {
  const t = new Int32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[i] = c;
  }
  return t;
})();

/** Continues `value` (a finished CRC-32, 0 to start) over buf[start, end). */
export function crc32Range(buf: Uint8Array, start: number, end: number, value = 0): number {
  assert(start >= 0 && start <= end && end <= buf.length, () => `crc range [${start}, ${end}) outside a buffer of ${buf.length} bytes`);
  let c = ~value;
  for (let i = start; i < end; i++) c = TABLE[(c ^ buf[i]!) & 0xff]! ^ (c >>> 8);
  return ~c >>> 0;
}
