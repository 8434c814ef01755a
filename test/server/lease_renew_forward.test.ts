/**
 * A follower's lease renewal and time-to-live (etcd's EtcdServer.LeaseRenew, LeaseTimeToLive):
 * forwarded to the leader and, while no leader can take them (none elected, the one known is gone or
 * no longer leads), tried again every 50 ms until the request timeout, then "etcdserver: request
 * timed out" ("etcdserver: no leader" if none was known). Any other answer (a lease the leader does
 * not know, a TTL) ends it at once. Real stores, fake raft side and leader client.
 */
import { describe, expect, it } from "vitest";
import { NONE, type NodeId } from "../../src/raft/types.js";
import { Errors } from "../../src/server/errors.js";
import { RENEW_RETRY_MS } from "../../src/server/v3_api.js";
import { v3ApiWith } from "./v3_api_fixture.js";

const LEADER = 7n;

/** `answers`: what each forwarded renewal gets in turn (an Error is thrown); the last one repeats. */
function follower(opts: { leader: () => NodeId; answers: Array<number | Error>; requestTimeoutMs: number }) {
  const forwarded: Array<{ leader: NodeId; url: string; at: number }> = [];
  /** The next answer in turn for a forwarded call (an Error is thrown); the last one repeats. */
  const answer = (leader: NodeId, url: string): number => {
    forwarded.push({ leader, url, at: performance.now() });
    const a = opts.answers[Math.min(forwarded.length, opts.answers.length) - 1]!;
    if (a instanceof Error) throw a;
    return a;
  };
  const { api, stores } = v3ApiWith({
    requestTimeoutMs: opts.requestTimeoutMs,
    raft: { leader: opts.leader, isLeader: () => false, raftTerm: () => 3, committed: () => 0, applied: () => 0, isLearner: () => false, moveLeader: async () => {} },
    leaderClient: {
      keepAlive: async (leader, url) => answer(leader, url),
      timeToLive: async (leader, url) => ({ header: undefined, ID: 0x10n, TTL: answer(leader, url), grantedTTL: 60, keys: [] }),
    },
  });
  stores.membership.add({ id: LEADER, name: "n7", peerUrls: ["http://127.0.0.1:1"], clientUrls: ["http://127.0.0.1:2"], isLearner: false });
  return { api, forwarded };
}

describe("lease renewal through a follower", () => {
  it("tries the leader again, 50 ms apart, while it answers 'leader changed', and returns the TTL it then gives", async () => {
    const { api, forwarded } = follower({ leader: () => LEADER, answers: [Errors.leaderChanged(), Errors.noLeader(), 30], requestTimeoutMs: 5000 });
    expect(await api.leaseRenew(0x10n)).toBe(30);
    expect(forwarded.map((f) => [f.leader, f.url])).toEqual([
      [LEADER, "http://127.0.0.1:2"],
      [LEADER, "http://127.0.0.1:2"],
      [LEADER, "http://127.0.0.1:2"],
    ]);
    // Timers may fire a millisecond early; never a whole throttle early.
    for (let i = 1; i < forwarded.length; i++) expect(forwarded[i]!.at - forwarded[i - 1]!.at).toBeGreaterThanOrEqual(RENEW_RETRY_MS - 2);
  });

  it("waits for a leader to be elected, then forwards to it", async () => {
    let leader: NodeId = NONE;
    const { api, forwarded } = follower({ leader: () => leader, answers: [45], requestTimeoutMs: 5000 });
    const renewed = api.leaseRenew(0x10n);
    await new Promise((r) => setTimeout(r, 3 * RENEW_RETRY_MS));
    expect(forwarded).toEqual([]);
    leader = LEADER;
    expect(await renewed).toBe(45);
    expect(forwarded.length).toBe(1);
  });

  it("answers 'request timed out' when no leader took it within the request timeout", async () => {
    const { api, forwarded } = follower({ leader: () => LEADER, answers: [Errors.leaderChanged()], requestTimeoutMs: 400 });
    const t0 = performance.now();
    await expect(api.leaseRenew(0x10n)).rejects.toThrow(Errors.timeout().message);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(400 - RENEW_RETRY_MS - 2);
    // One attempt at once and one per throttle after it, within the timeout.
    expect(forwarded.length).toBeGreaterThanOrEqual(2);
    expect(forwarded.length).toBeLessThanOrEqual(400 / RENEW_RETRY_MS + 1);
  });

  it("passes a lease the leader does not know, or any other error, straight back", async () => {
    const notFound = follower({ leader: () => LEADER, answers: [Errors.leaseNotFound()], requestTimeoutMs: 5000 });
    await expect(notFound.api.leaseRenew(0x10n)).rejects.toThrow(Errors.leaseNotFound().message);
    expect(notFound.forwarded.length).toBe(1);
    const denied = follower({ leader: () => LEADER, answers: [Errors.permissionDenied()], requestTimeoutMs: 5000 });
    await expect(denied.api.leaseRenew(0x10n)).rejects.toThrow(Errors.permissionDenied().message);
    expect(denied.forwarded.length).toBe(1);
  });

  it("stops trying once the caller went away", async () => {
    const { api, forwarded } = follower({ leader: () => LEADER, answers: [Errors.leaderChanged()], requestTimeoutMs: 5000 });
    const ac = new AbortController();
    const renewed = api.leaseRenew(0x10n, ac.signal);
    await new Promise((r) => setTimeout(r, 2 * RENEW_RETRY_MS));
    ac.abort();
    await expect(renewed).rejects.toThrow("etcdserver: request cancelled");
    const n = forwarded.length;
    await new Promise((r) => setTimeout(r, 3 * RENEW_RETRY_MS));
    expect(forwarded.length).toBe(n);
  });

  it("answers 'no leader' when none was elected within the request timeout", async () => {
    const { api, forwarded } = follower({ leader: () => NONE, answers: [30], requestTimeoutMs: 300 });
    await expect(api.leaseRenew(0x10n)).rejects.toThrow(Errors.noLeader().message);
    expect(forwarded).toEqual([]);
  });

  it("forwards a time-to-live the same way: tried again while the leader is unavailable, then its answer", async () => {
    const { api, forwarded } = follower({ leader: () => LEADER, answers: [Errors.leaderChanged(), 25], requestTimeoutMs: 5000 });
    expect(await api.leaseTimeToLive({ ID: 0x10n, keys: false })).toEqual({ ID: 0x10n, TTL: 25, grantedTTL: 60, keys: [] });
    expect(forwarded.length).toBe(2);
    const gone = follower({ leader: () => LEADER, answers: [Errors.leaderChanged()], requestTimeoutMs: 300 });
    await expect(gone.api.leaseTimeToLive({ ID: 0x10n, keys: false })).rejects.toThrow(Errors.timeout().message);
  });
});
