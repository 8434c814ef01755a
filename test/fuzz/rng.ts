/**
 * A small seeded PRNG (sfc32 seeded through splitmix32) for the fuzzers: every generated input is a
 * pure function of the seed, so a printed seed replays the run. Not cryptographic, never shared
 * between suites (each forks its own stream from a label).
 */

function splitmix32(state: number): () => number {
  let s = state >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    const init = splitmix32(seed);
    this.a = init();
    this.b = init();
    this.c = init();
    this.d = init();
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** A uniformly distributed unsigned 32-bit integer. */
  u32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.u32() / 4294967296;
  }

  /** An integer in [0, n). */
  int(n: number): number {
    if (!(n >= 1)) throw new Error(`Rng.int: bad bound ${n}`);
    return Math.floor(this.float() * n);
  }

  /** An integer in [lo, hi] (inclusive). */
  between(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  bool(pTrue = 0.5): boolean {
    return this.float() < pTrue;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new Error("Rng.pick: empty list");
    return items[this.int(items.length)]!;
  }

  /** Picks by weight: `[[weight, value], ...]`. */
  weighted<T>(choices: readonly (readonly [number, T])[]): T {
    const total = choices.reduce((s, [w]) => s + w, 0);
    let x = this.float() * total;
    for (const [w, v] of choices) {
      if (x < w) return v;
      x -= w;
    }
    return choices[choices.length - 1]![1];
  }

  bytes(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) out[i] = this.u32() & 0xff;
    return out;
  }

  /** A size skewed towards small values (most fuzz inputs are short, a few are long). */
  size(max: number): number {
    return Math.min(max, Math.floor(Math.pow(this.float(), 3) * (max + 1)));
  }

  /** An independent stream derived from this seed and a label (case i of a run replays alone). */
  static forCase(seed: number, label: number): Rng {
    return new Rng((Math.imul(seed ^ 0x5bd1e995, 0x27d4eb2d) + Math.imul(label + 1, 0x165667b1)) >>> 0);
  }
}
