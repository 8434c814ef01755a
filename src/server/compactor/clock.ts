/**
 * The compactors' clock (etcd uses clockwork.Clock so its tests need not wait on wall-clock time):
 * `now` in milliseconds and a one-shot timer. The member passes `realClock`; unit tests pass a fake
 * clock they advance by hand.
 */
export interface CompactorClock {
  /** Milliseconds on a monotonic scale. */
  now(): number;
  /** Calls `fn` once after `ms`; the returned function cancels it. */
  after(ms: number, fn: () => void): () => void;
}

export const realClock: CompactorClock = {
  now: () => performance.now(),
  after: (ms, fn) => {
    const t = setTimeout(fn, ms);
    // A compactor never keeps the process alive on its own.
    t.unref();
    return () => clearTimeout(t);
  },
};
