/**
 * Password hashes (etcd's bcrypt use): hashed with `--bcrypt-cost` on the member that proposes a
 * UserAdd or UserChangePassword, so the entry carries the hash, never the password, and apply stays
 * deterministic; checked by Authenticate before it proposes.
 *
 * The `bcrypt` package (native) hashes and compares on libuv's thread pool: a login storm costs
 * the event loop nothing (a pure-JS bcrypt, even its async form, runs every round on the main
 * thread in slices). The pool also serves the file system (WAL and backend fsyncs), so at most
 * `maxConcurrent` bcrypt jobs run at once (half the default pool of 4) and at most `maxWaiting`
 * wait behind them; past that a request is refused at once rather than queued without bound.
 */
import bcrypt from "bcrypt";

/** bcrypt's bounds on the cost (Go's bcrypt.MinCost/MaxCost, as etcd checks --bcrypt-cost). */
export const BCRYPT_MIN_COST = 4;
export const BCRYPT_MAX_COST = 31;
/** etcd's default --bcrypt-cost (bcrypt.DefaultCost). */
export const BCRYPT_DEFAULT_COST = 10;

export interface PasswordHasherOptions {
  cost: number;
  maxConcurrent?: number;
  maxWaiting?: number;
}

/** Too many password checks are waiting already. */
export class PasswordQueueFullError extends Error {
  constructor() {
    super("password check queue is full");
    this.name = "PasswordQueueFullError";
  }
}

export class PasswordHasher {
  readonly cost: number;
  private running = 0;
  private readonly waiting: Array<() => void> = [];
  private readonly maxConcurrent: number;
  private readonly maxWaiting: number;

  constructor(o: PasswordHasherOptions) {
    if (!Number.isInteger(o.cost) || o.cost < BCRYPT_MIN_COST || o.cost > BCRYPT_MAX_COST) {
      throw new Error(`invalid bcrypt-cost: ${o.cost} (must be between ${BCRYPT_MIN_COST} and ${BCRYPT_MAX_COST})`);
    }
    this.cost = o.cost;
    this.maxConcurrent = o.maxConcurrent ?? 2;
    this.maxWaiting = o.maxWaiting ?? 1024;
  }

  /** The bcrypt hash of `password` (as bytes, the form etcd stores). */
  hash(password: string): Promise<Buffer> {
    return this.slot(async () => Buffer.from(await bcrypt.hash(password, this.cost)));
  }

  /** Whether `password` matches `hash`; a malformed hash never matches. */
  compare(password: string, hash: Buffer): Promise<boolean> {
    if (hash.length === 0) return Promise.resolve(false);
    return this.slot(() => bcrypt.compare(password, hash.toString()).catch(() => false));
  }

  get queued(): number {
    return this.waiting.length;
  }

  private async slot<T>(job: () => Promise<T>): Promise<T> {
    if (this.running < this.maxConcurrent) {
      this.running++;
    } else {
      if (this.waiting.length >= this.maxWaiting) throw new PasswordQueueFullError();
      // The releasing job hands its slot over: `running` stays counted.
      await new Promise<void>((resolve) => this.waiting.push(resolve));
    }
    try {
      return await job();
    } finally {
      const next = this.waiting.shift();
      if (next !== undefined) next();
      else this.running--;
    }
  }
}
