/**
 * CommitHold (src/server/commit_hold.ts): a commit-only append waits up to its hold for a later
 * append of the same term to carry its commit index (and is then dropped), goes out when the hold
 * ends, and never reorders the messages to a peer otherwise. Also the ETCETERA_COMMIT_HOLD_MS parser.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { COMMIT_HOLD_MS_DEFAULT, CommitHold, commitHoldMsFromEnv } from "../../src/server/commit_hold.js";
import { newMessage } from "../../src/raft/raft.js";
import { type Entry, type Message, MessageType } from "../../src/raft/types.js";

const entry = (index: number): Entry => ({ index, term: 2, type: 0, data: new Uint8Array([index]) }) as Entry;
const commitOnly = (to: bigint, commit: number, term = 2): Message => newMessage({ type: MessageType.MsgApp, to, term, index: 10, logTerm: 2, commit });
const append = (to: bigint, commit: number, term = 2): Message => newMessage({ type: MessageType.MsgApp, to, term, index: 10, logTerm: 2, entries: [entry(11)], commit });
const heartbeat = (to: bigint, commit: number): Message => newMessage({ type: MessageType.MsgHeartbeat, to, term: 2, commit });

describe("CommitHold", () => {
  let sent: Message[][];
  let hold: CommitHold;
  beforeEach(() => {
    vi.useFakeTimers();
    sent = [];
    hold = new CommitHold(2, (msgs) => sent.push(msgs));
  });
  afterEach(() => {
    hold.clear();
    vi.useRealTimers();
  });

  it("drops a held commit-only append that a later append of the same term supersedes", () => {
    hold.send([commitOnly(2n, 7), commitOnly(3n, 7)]);
    expect(sent).toEqual([]);
    const next = [append(2n, 8), append(3n, 8)];
    hold.send(next);
    expect(sent).toEqual([next]);
    vi.advanceTimersByTime(10);
    expect(sent).toEqual([next]);
  });

  it("sends a held one when the hold ends, and the newest of several to one peer only", () => {
    hold.send([commitOnly(2n, 7)]);
    hold.send([commitOnly(2n, 8)]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([[commitOnly(2n, 8)]]);
  });

  it("keeps the order to a peer: a message of another type goes after the held append", () => {
    hold.send([commitOnly(2n, 7)]);
    hold.send([heartbeat(2n, 7), append(3n, 7)]);
    expect(sent).toEqual([[commitOnly(2n, 7), heartbeat(2n, 7), append(3n, 7)]]);
  });

  it("does not let an append of a newer term supersede a held one of an older term", () => {
    hold.send([commitOnly(2n, 7, 2)]);
    hold.send([append(2n, 1, 3)]);
    expect(sent).toEqual([[commitOnly(2n, 7, 2), append(2n, 1, 3)]]);
  });

  it("flush sends what is held at once; clear drops it", () => {
    hold.send([commitOnly(2n, 7)]);
    hold.flush();
    expect(sent).toEqual([[commitOnly(2n, 7)]]);
    hold.send([commitOnly(3n, 8)]);
    hold.clear();
    vi.advanceTimersByTime(10);
    expect(sent).toEqual([[commitOnly(2n, 7)]]);
  });

  it("with a hold of 0 sends everything as it comes, as etcd does", () => {
    const now = new CommitHold(0, (msgs) => sent.push(msgs));
    now.send([commitOnly(2n, 7)]);
    expect(sent).toEqual([[commitOnly(2n, 7)]]);
  });

  it("refuses a later append of the same term with a lower commit index (it cannot carry the held one's)", () => {
    hold.send([commitOnly(2n, 7)]);
    expect(() => hold.send([append(2n, 6)])).toThrow(/lower commit index/);
  });
});

describe("ETCETERA_COMMIT_HOLD_MS", () => {
  it("defaults, accepts integers in [0, 50], refuses anything else by name", () => {
    expect(commitHoldMsFromEnv({})).toBe(COMMIT_HOLD_MS_DEFAULT);
    expect(commitHoldMsFromEnv({ ETCETERA_COMMIT_HOLD_MS: "0" })).toBe(0);
    expect(commitHoldMsFromEnv({ ETCETERA_COMMIT_HOLD_MS: "50" })).toBe(50);
    for (const bad of ["", "-1", "51", "1.5", "2ms"]) {
      expect(commitHoldMsFromEnv({ ETCETERA_COMMIT_HOLD_MS: bad })).toEqual({ error: expect.stringContaining("ETCETERA_COMMIT_HOLD_MS") });
    }
  });
});
