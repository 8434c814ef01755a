/**
 * Waiters for proposals: the handler that proposed request `id` parks here until the apply loop
 * triggers `id` with the result (or an error). Bounded: `register` refuses past `maxPending`, which
 * the server answers with "etcdserver: too many requests".
 *
 * Each waiter carries its deadline. Deadlines never go down from one registration to the next
 * (every proposal has the same timeout from a monotonic clock), and a Map iterates in insertion
 * order, so the waiters due are always at the front: `expire` walks only those. A queue of its
 * own (two arrays, one push each per proposal) cost a growing array per put under load: at 1,000
 * clients it held a request timeout's worth of ids, ~50k, regrown and spliced over and over
 * (issue 18: 1.3% of the leader's main thread).
 */
export interface Waiter<T> {
  resolve(v: T): void;
  reject(e: Error): void;
}

interface Entry<T> extends Waiter<T> {
  readonly deadlineMs: number;
}

export class Wait<T> {
  private readonly pending = new Map<number, Entry<T>>();
  private lastDeadlineMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly maxPending: number) {}

  get size(): number {
    return this.pending.size;
  }

  isFull(): boolean {
    return this.pending.size >= this.maxPending;
  }

  /**
   * Registers `id`, due at `deadlineMs` (never below the last registration's); the returned
   * promise settles when `trigger`, `fail` or `expire` is called for it.
   */
  register(id: number, deadlineMs: number): Promise<T> {
    if (this.pending.has(id)) throw new Error(`wait: duplicate id ${id}`);
    if (!(deadlineMs >= this.lastDeadlineMs)) throw new Error(`wait: deadline ${deadlineMs} before the last one registered (${this.lastDeadlineMs})`);
    this.lastDeadlineMs = deadlineMs;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve, reject, deadlineMs });
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

  /** Fails, oldest first, every waiter whose deadline is at or before `nowMs`; returns how many. */
  expire(nowMs: number, make: () => Error): number {
    let n = 0;
    for (const [id, w] of this.pending) {
      if (w.deadlineMs > nowMs) break;
      this.pending.delete(id);
      w.reject(make());
      n++;
    }
    return n;
  }

  failAll(make: () => Error): void {
    const all = [...this.pending.values()];
    this.pending.clear();
    for (const w of all) w.reject(make());
  }
}
