/**
 * Request ids unique across the cluster (as etcd's idutil): the member id's low 16 bits prefix a
 * counter that starts from the clock, so ids from different members, and from one member before and
 * after a restart, do not collide. Ids stay below 2^53 so they are exact JavaScript numbers.
 */
const COUNTER_BITS = 36; // 16 + 36 = 52 bits
const COUNTER_SPAN = 2 ** COUNTER_BITS;

export class IdGenerator {
  private readonly prefix: number;
  private counter: number;

  constructor(memberId: bigint, nowMs: number) {
    this.prefix = Number(memberId & 0xffffn) * COUNTER_SPAN;
    // Millisecond clock in the counter's upper bits: a restarted member starts past its old ids.
    this.counter = (nowMs * 256) % COUNTER_SPAN;
  }

  next(): number {
    this.counter = (this.counter + 1) % COUNTER_SPAN;
    const id = this.prefix + this.counter;
    if (!Number.isSafeInteger(id) || id <= 0) throw new Error(`id generator produced an unsafe id ${id}`);
    return id;
  }
}
