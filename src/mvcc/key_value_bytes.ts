/**
 * A row as the bytes etcd's bbolt holds for it: mvccpb.KeyValue marshalled as gogoproto does
 * (fields 1-6 in number order, each left out at its zero value, int64s as varints of their
 * two's complement), and a tombstone as KeyValue{key} alone (etcd's delete writes no more). HashKV
 * (hash.ts) hashes these, so its result is etcd's for the same data.
 */
import { invariant } from './errors.js';
import type { KvRow } from './kv_backend.js';
import { revMain, revSub } from './revision.js';

const TAG_KEY = 0x0a;
const TAG_CREATE_REVISION = 0x10;
const TAG_MOD_REVISION = 0x18;
const TAG_VERSION = 0x20;
const TAG_VALUE = 0x2a;
const TAG_LEASE = 0x30;
/** A varint of 64 bits takes at most 10 bytes; a length at most 5 here. */
const FIXED_FIELDS_MAX = 4 * 11 + 2 * 6;
const TWO_32 = 2 ** 32;

/** Marshals rows into one buffer reused from row to row (a HashKV reads every row of the store). */
export class KeyValueBytes {
  private buf = Buffer.allocUnsafe(1024);
  private pos = 0;
  private readonly revKey = Buffer.alloc(18);

  /**
   * The row's bbolt key: etcd's 17-byte revision key (8-byte big-endian main, '_', 8-byte
   * big-endian sub) with 't' appended for a tombstone, as etcd marks them; valid until the next call.
   */
  revisionKey(row: KvRow): Buffer {
    const main = revMain(row.rev);
    const sub = revSub(row.rev);
    const b = this.revKey;
    b.writeUInt32BE(Math.floor(main / TWO_32), 0);
    b.writeUInt32BE(main % TWO_32, 4);
    b[8] = 0x5f;
    b.writeUInt32BE(0, 9);
    b.writeUInt32BE(sub, 13);
    if (!row.tombstone) return b.subarray(0, 17);
    b[17] = 0x74;
    return b;
  }

  /** The row's bytes; valid until the next call. */
  marshal(row: KvRow): Buffer {
    const need = FIXED_FIELDS_MAX + row.key.length + (row.tombstone ? 0 : row.value.length);
    if (need > this.buf.length) this.buf = Buffer.allocUnsafe(Math.max(need, this.buf.length * 2));
    this.pos = 0;
    this.bytesField(TAG_KEY, row.key);
    if (!row.tombstone) {
      this.int64Field(TAG_CREATE_REVISION, row.createRev);
      this.int64Field(TAG_MOD_REVISION, revMain(row.rev));
      this.int64Field(TAG_VERSION, row.version);
      this.bytesField(TAG_VALUE, row.value);
      this.int64Field(TAG_LEASE, row.lease);
    }
    invariant(this.pos <= need, () => `KeyValue of ${this.pos} bytes overran its ${need}`);
    return this.buf.subarray(0, this.pos);
  }

  private bytesField(tag: number, bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.buf[this.pos++] = tag;
    this.uvarint(bytes.length);
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  private int64Field(tag: number, n: number | bigint): void {
    if (n === 0 || n === 0n) return;
    this.buf[this.pos++] = tag;
    if (typeof n === 'number' && n > 0 && Number.isSafeInteger(n)) this.uvarint(n);
    else this.uvarint64(BigInt.asUintN(64, BigInt(n)));
  }

  /** A non-negative safe integer as a varint. */
  private uvarint(n: number): void {
    while (n >= 0x80) {
      this.buf[this.pos++] = (n % 0x80) | 0x80;
      n = n >= TWO_32 ? Math.floor(n / 0x80) : n >>> 7;
    }
    this.buf[this.pos++] = n;
  }

  /** Any uint64 (a negative int64's two's complement: 10 bytes). */
  private uvarint64(n: bigint): void {
    while (n >= 0x80n) {
      this.buf[this.pos++] = Number(n & 0x7fn) | 0x80;
      n >>= 7n;
    }
    this.buf[this.pos++] = Number(n);
  }
}
