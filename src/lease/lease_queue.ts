/**
 * An indexed binary min-heap (etcd's LeaseQueue / LeaseExpiredNotifier): each item remembers its
 * own position, so a renew moves a lease in O(log n) instead of leaving a stale entry behind, and
 * the heap never holds more than one entry per lease.
 *
 * The position lives on the item (through `getIndex`/`setIndex`) so one object can sit in two heaps
 * (expiry and checkpoint) without a wrapper allocation per lease. -1 means "not in this heap".
 */
export interface LeaseQueueSlots<T> {
  key(item: T): number;
  getIndex(item: T): number;
  setIndex(item: T, index: number): void;
}

export class LeaseQueue<T> {
  private readonly items: T[] = [];

  constructor(private readonly slots: LeaseQueueSlots<T>) {}

  get size(): number {
    return this.items.length;
  }

  peek(): T | undefined {
    return this.items[0];
  }

  has(item: T): boolean {
    return this.slots.getIndex(item) >= 0;
  }

  /** Inserts the item, or re-positions it if its key changed while queued. */
  upsert(item: T): void {
    const index = this.slots.getIndex(item);
    if (index < 0) {
      this.items.push(item);
      this.slots.setIndex(item, this.items.length - 1);
      this.up(this.items.length - 1);
      return;
    }
    this.assertAt(item, index);
    if (!this.up(index)) this.down(index);
  }

  pop(): T | undefined {
    const top = this.items[0];
    if (top === undefined) return undefined;
    this.removeAt(0);
    return top;
  }

  remove(item: T): void {
    const index = this.slots.getIndex(item);
    if (index < 0) return;
    this.assertAt(item, index);
    this.removeAt(index);
  }

  /** Empties the heap, marking every item as not queued. */
  clear(): void {
    for (const item of this.items) this.slots.setIndex(item, -1);
    this.items.length = 0;
  }

  private assertAt(item: T, index: number): void {
    if (this.items[index] !== item) throw new Error(`lease queue invariant violated: item not at its index ${index}`);
  }

  private removeAt(index: number): void {
    const last = this.items.length - 1;
    const removed = this.items[index] as T;
    if (index !== last) {
      this.swap(index, last);
      this.items.pop();
      if (!this.up(index)) this.down(index);
    } else {
      this.items.pop();
    }
    this.slots.setIndex(removed, -1);
  }

  private less(i: number, j: number): boolean {
    return this.slots.key(this.items[i] as T) < this.slots.key(this.items[j] as T);
  }

  private swap(i: number, j: number): void {
    const a = this.items[i] as T;
    const b = this.items[j] as T;
    this.items[i] = b;
    this.items[j] = a;
    this.slots.setIndex(b, i);
    this.slots.setIndex(a, j);
  }

  /** Sifts up; returns whether the item moved. */
  private up(index: number): boolean {
    let i = index;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
    return i !== index;
  }

  private down(index: number): void {
    const n = this.items.length;
    let i = index;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) return;
      const right = left + 1;
      const child = right < n && this.less(right, left) ? right : left;
      if (!this.less(child, i)) return;
      this.swap(i, child);
      i = child;
    }
  }
}
