/**
 * etcd's revision as the key of the `key` bucket: 8-byte big-endian main revision, '_', 8-byte
 * big-endian sub revision (17 bytes); a deletion (tombstone) appends 't' (18 bytes). Byte order
 * of these keys is revision order, so the bucket iterates history oldest first.
 */

export const REVISION_KEY_BYTES = 17;
const SEPARATOR = 0x5f; // '_'
const TOMBSTONE_MARK = 0x74; // 't'

export interface RevisionKey {
  readonly main: number;
  readonly sub: number;
  readonly tombstone: boolean;
}

export function encodeRevisionKey(main: number, sub: number, tombstone = false): Buffer {
  if (!Number.isSafeInteger(main) || main < 0 || !Number.isSafeInteger(sub) || sub < 0) {
    throw new RangeError(`revision ${main}_${sub} is not a pair of non-negative integers`);
  }
  const b = Buffer.alloc(REVISION_KEY_BYTES + (tombstone ? 1 : 0));
  b.writeBigInt64BE(BigInt(main), 0);
  b[8] = SEPARATOR;
  b.writeBigInt64BE(BigInt(sub), 9);
  if (tombstone) b[REVISION_KEY_BYTES] = TOMBSTONE_MARK;
  return b;
}

/** The revision of a `key`-bucket key, or a reason it is not one. */
export function decodeRevisionKey(key: Uint8Array): RevisionKey | string {
  const tombstone = key.length === REVISION_KEY_BYTES + 1;
  if (key.length !== REVISION_KEY_BYTES && !tombstone) return `revision key of ${key.length} bytes (want 17, or 18 for a tombstone)`;
  if (key[8] !== SEPARATOR) return `revision key without '_' at byte 8`;
  if (tombstone && key[REVISION_KEY_BYTES] !== TOMBSTONE_MARK) return `18-byte revision key not ending in 't'`;
  const b = Buffer.from(key.buffer, key.byteOffset, key.length);
  const main = b.readBigInt64BE(0);
  const sub = b.readBigInt64BE(9);
  const max = BigInt(Number.MAX_SAFE_INTEGER);
  if (main < 0n || main > max || sub < 0n || sub > max) return `revision ${main}_${sub} outside [0, 2^53)`;
  return { main: Number(main), sub: Number(sub), tombstone };
}
