/** Runs async work with a bounded number in flight (the fuzzers' only scheduler). */

/**
 * Calls `work(i)` for i = 0, 1, ... with at most `concurrency` calls in flight, until `more(i)`
 * says stop (checked before each start). Resolves with the number of calls made.
 */
export async function runBounded(concurrency: number, more: (i: number) => boolean, work: (i: number, lane: number) => Promise<void>): Promise<number> {
  let next = 0;
  const lanes = Array.from({ length: concurrency }, async (_, lane) => {
    while (more(next)) {
      const i = next++;
      await work(i, lane);
    }
  });
  await Promise.all(lanes);
  return next;
}
