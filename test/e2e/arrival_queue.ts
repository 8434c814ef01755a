/** Messages of one stream in arrival order, awaited one at a time (the e2e watch clients share it). */
export class ArrivalQueue<T> {
  private readonly items: T[] = [];
  private wake: (() => void) | undefined;
  /** Why the stream ended, once it did (the first reason given wins). */
  endedBy: string | undefined;

  push(item: T): void {
    this.items.push(item);
    this.wake?.();
  }

  /** The stream ended: a waiting next() fails once the queue is drained. */
  end(reason: string): void {
    this.endedBy ??= reason;
    this.wake?.();
  }

  /** The next message; fails when the stream ended with nothing queued, or after `timeoutMs`. */
  async next(timeoutMs: number): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    while (this.items.length === 0) {
      if (this.endedBy !== undefined) throw new Error(`watch stream ended: ${this.endedBy}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("no watch response in time");
      await new Promise<void>((r) => {
        const t = setTimeout(r, left);
        this.wake = () => {
          clearTimeout(t);
          r();
        };
      });
      this.wake = undefined;
    }
    return this.items.shift()!;
  }
}
