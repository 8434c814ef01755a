/**
 * Waiters on the applied index (etcd's pkg/wait WaitTime, the server's applyWait): a linearizable
 * read parks here until the apply loop has applied its read index.
 */
export class WaitTime {
  private applied = 0;
  private readonly waiters: Array<{ index: number; resolve(): void }> = [];

  /** The applied index so far. */
  get index(): number {
    return this.applied;
  }

  /** Resolves once the applied index reaches `index`. */
  wait(index: number): Promise<void> {
    if (this.applied >= index) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ index, resolve }));
  }

  /** Records the applied index (it never goes back) and wakes every waiter it reaches. */
  trigger(index: number): void {
    if (index > this.applied) this.applied = index;
    const w = this.waiters;
    if (w.length === 0) return;
    let keep = 0;
    for (const x of w) {
      if (x.index <= this.applied) x.resolve();
      else w[keep++] = x;
    }
    w.length = keep;
  }
}
