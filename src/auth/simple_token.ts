/**
 * Simple tokens (etcd's auth/simple_token.go): `<16 random letters>.<raft index>`, the letters
 * chosen by the member that proposed the Authenticate, the index that of its entry, so every
 * member registers the same token when it applies the entry. Tokens live in memory only (a
 * restart forgets them, as etcd's do) and expire after `--auth-token-ttl` seconds without use:
 * every use pushes the deadline back. A token naming an index this member has not applied yet
 * waits for that apply (a client may reach a follower right after authenticating on the leader).
 */
import { randomInt } from "node:crypto";
import type { TokenProvider } from "./token.js";
import type { AuthInfo } from "./types.js";

const LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
/** etcd's defaultSimpleTokenLength. */
export const SIMPLE_TOKEN_LENGTH = 16;
/** etcd's simpleTokenTTLResolution: how often expired tokens are swept. */
const SWEEP_MS = 1000;
/** Bound on live tokens: a login storm cannot grow the map without limit (oldest go first). */
export const MAX_SIMPLE_TOKENS = 1_000_000;

export interface SimpleTokenOptions {
  ttlMs: number;
  /** Monotonic milliseconds. */
  now(): number;
  /** Resolves once this member applied `index`. */
  waitApplied(index: number, signal?: AbortSignal): Promise<void>;
  maxTokens?: number;
}

interface Entry {
  username: string;
  deadlineMs: number;
}

/** Splits a token into its prefix and index, or undefined when it is not `<letters>.<index>`. */
export function parseSimpleToken(token: string): { prefix: string; index: number } | undefined {
  const dot = token.indexOf(".");
  if (dot < 0 || token.indexOf(".", dot + 1) >= 0) return undefined;
  const digits = token.slice(dot + 1);
  if (!/^[0-9]{1,16}$/.test(digits)) return undefined;
  const index = Number(digits);
  if (!Number.isSafeInteger(index)) return undefined;
  return { prefix: token.slice(0, dot), index };
}

export class SimpleTokenProvider implements TokenProvider {
  readonly kind = "simple";
  private readonly tokens = new Map<string, Entry>();
  private timer: NodeJS.Timeout | undefined;
  private readonly maxTokens: number;

  constructor(private readonly o: SimpleTokenOptions) {
    if (!(o.ttlMs > 0)) throw new Error("simple token: ttl must be positive");
    this.maxTokens = o.maxTokens ?? MAX_SIMPLE_TOKENS;
  }

  get size(): number {
    return this.tokens.size;
  }

  enable(): void {
    if (this.timer === undefined) {
      this.timer = setInterval(() => this.sweep(), SWEEP_MS);
      this.timer.unref();
    }
  }

  disable(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.tokens.clear();
  }

  invalidateUser(username: string): void {
    for (const [t, e] of this.tokens) if (e.username === username) this.tokens.delete(t);
  }

  genTokenPrefix(): string {
    let s = "";
    for (let i = 0; i < SIMPLE_TOKEN_LENGTH; i++) s += LETTERS[randomInt(LETTERS.length)];
    return s;
  }

  assignAtApply(username: string, _revision: number, prefix: string, index: number): string {
    const token = `${prefix}.${index}`;
    if (this.tokens.size >= this.maxTokens) {
      // Maps iterate in insertion order: the first entry is the oldest token.
      const oldest = this.tokens.keys().next();
      if (!oldest.done) this.tokens.delete(oldest.value);
    }
    this.tokens.set(token, { username, deadlineMs: this.o.now() + this.o.ttlMs });
    return token;
  }

  sign(): Promise<string> {
    return Promise.reject(new Error("simple tokens are assigned when Authenticate is applied"));
  }

  async info(token: string, currentRevision: number, signal?: AbortSignal): Promise<AuthInfo | undefined> {
    const parsed = parseSimpleToken(token);
    if (parsed === undefined) return undefined;
    await this.o.waitApplied(parsed.index, signal);
    const e = this.tokens.get(token);
    if (e === undefined) return undefined;
    const now = this.o.now();
    if (e.deadlineMs <= now) {
      this.tokens.delete(token);
      return undefined;
    }
    e.deadlineMs = now + this.o.ttlMs; // etcd's resetSimpleToken: a used token lives on
    return { username: e.username, revision: currentRevision };
  }

  /** Drops expired tokens (also run by the timer). */
  sweep(): void {
    const now = this.o.now();
    for (const [t, e] of this.tokens) if (e.deadlineMs <= now) this.tokens.delete(t);
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }
}
