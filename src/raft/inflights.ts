import { assert } from "./assert.js";

/**
 * The MsgApps sent to one follower and not yet acknowledged, as a ring buffer of (last index,
 * bytes). The window is bounded both by count and by bytes: once full, the leader stops sending
 * to that follower until an acknowledgement frees room.
 */
export class Inflights {
  private start = 0;
  private count = 0;
  private bytes = 0;
  private readonly indexes: number[];
  private readonly sizes: number[];

  constructor(
    readonly sizeMax: number,
    readonly bytesMax: number = 0,
  ) {
    assert(sizeMax > 0, "inflights size must be positive");
    this.indexes = new Array<number>(sizeMax).fill(0);
    this.sizes = new Array<number>(sizeMax).fill(0);
  }

  clone(): Inflights {
    const c = new Inflights(this.sizeMax, this.bytesMax);
    for (let i = 0; i < this.count; i++) {
      const k = (this.start + i) % this.sizeMax;
      c.add(this.indexes[k], this.sizes[k]);
    }
    return c;
  }

  /** Record a MsgApp whose last entry is `index`, carrying `bytes` of entries. */
  add(index: number, bytes: number): void {
    assert(!this.full(), "cannot add into a full inflights");
    if (this.count > 0) {
      const lastK = (this.start + this.count - 1) % this.sizeMax;
      assert(index > this.indexes[lastK], () => `inflight index ${index} not above ${this.indexes[lastK]}`);
    }
    const k = (this.start + this.count) % this.sizeMax;
    this.indexes[k] = index;
    this.sizes[k] = bytes;
    this.count++;
    this.bytes += bytes;
  }

  /** Free every inflight message whose last index is ≤ `to`. */
  freeLE(to: number): void {
    while (this.count > 0 && this.indexes[this.start] <= to) {
      this.bytes -= this.sizes[this.start];
      this.start = (this.start + 1) % this.sizeMax;
      this.count--;
    }
    if (this.count === 0) this.start = 0;
  }

  freeFirstOne(): void {
    if (this.count === 0) return;
    this.freeLE(this.indexes[this.start]);
  }

  full(): boolean {
    return this.count === this.sizeMax || (this.bytesMax > 0 && this.bytes >= this.bytesMax);
  }

  size(): number {
    return this.count;
  }

  sizeBytes(): number {
    return this.bytes;
  }

  reset(): void {
    this.start = 0;
    this.count = 0;
    this.bytes = 0;
  }
}
