/**
 * Waiters for proposals: the handler that proposed request `id` parks here until the apply loop
 * triggers `id` with the result (or an error). Bounded: `register` refuses past `maxPending`, which
 * the server answers with "etcdserver: too many requests".
 */
export interface Waiter<T> {
  resolve(v: T): void;
  reject(e: Error): void;
}

export class Wait<T> {
  private readonly pending = new Map<number, Waiter<T>>();

  constructor(private readonly maxPending: number) {}

  get size(): number {
    return this.pending.size;
  }

  isFull(): boolean {
    return this.pending.size >= this.maxPending;
  }

  /** Registers `id`; the returned promise settles when `trigger` or `fail` is called for it. */
  register(id: number): Promise<T> {
    if (this.pending.has(id)) throw new Error(`wait: duplicate id ${id}`);
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
    });
  }

  has(id: number): boolean {
    return this.pending.has(id);
  }

  trigger(id: number, v: T): boolean {
    const w = this.pending.get(id);
    if (w === undefined) return false;
    this.pending.delete(id);
    w.resolve(v);
    return true;
  }

  fail(id: number, e: Error): boolean {
    const w = this.pending.get(id);
    if (w === undefined) return false;
    this.pending.delete(id);
    w.reject(e);
    return true;
  }

  failAll(make: () => Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const w of all) w.reject(make());
  }
}
