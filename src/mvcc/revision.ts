/**
 * A revision {main, sub}: main increments once per modifying request (a whole
 * Txn is one main revision), sub numbers the changes inside it.
 *
 * Packed into one JS number (main * 2^20 + sub) so the key index can keep its
 * revisions in flat double arrays (8 bytes each) and SQLite can use it as the
 * INTEGER PRIMARY KEY. Packed order equals etcd's (main, sub) order.
 */

export const SUB_BITS = 20;
const SUB_SPAN = 2 ** SUB_BITS;
/** Largest sub revision: one revision may hold at most this many + 1 changes. */
export const SUB_MAX = SUB_SPAN - 1;
/** Largest main revision that still packs exactly into a double (2^33 ≈ 8.6e9). */
export const MAIN_MAX = 2 ** (53 - SUB_BITS) - 1;

export interface Revision {
  main: number;
  sub: number;
}

export function packRev(main: number, sub: number): number {
  if (!(Number.isInteger(main) && main >= 0 && main <= MAIN_MAX)) throw new RangeError(`mvcc: main revision out of range: ${main}`);
  if (!(Number.isInteger(sub) && sub >= 0 && sub <= SUB_MAX)) throw new RangeError(`mvcc: sub revision out of range: ${sub}`);
  return main * SUB_SPAN + sub;
}

export function revMain(packed: number): number {
  return Math.floor(packed / SUB_SPAN);
}

export function revSub(packed: number): number {
  return packed % SUB_SPAN;
}

export function unpackRev(packed: number): Revision {
  return { main: revMain(packed), sub: revSub(packed) };
}

/** The smallest packed revision with this main (sub 0). */
export function firstOfMain(main: number): number {
  return main * SUB_SPAN;
}

/** The largest packed revision with this main. */
export function lastOfMain(main: number): number {
  return main * SUB_SPAN + SUB_MAX;
}
