/**
 * The applier on its own, over real stores in a temp backend (kv, lessor, alarms, membership) and
 * a recording stand-in for raft's ApplyConfChange: each committed entry goes to the store it
 * concerns exactly once, errors become the outcome of the entry (which still counts as applied),
 * and a NOSPACE alarm lets through only what etcd lets through.
 */
import { describe, expect, it } from "vitest";
import { encodeConfChangeV2 } from "../../src/raft/index.js";
import { ConfChangeTransition, ConfChangeType, EntryType, type ConfChangeV2, type ConfState, type Entry } from "../../src/raft/types.js";
import { AlarmAction, AlarmType } from "../../src/server/alarms.js";
import { Applier } from "../../src/server/apply.js";
import { encodeConfChangeContext } from "../../src/server/conf_change_context.js";
import { silentLogger } from "../../src/server/logger.js";
import type { Member } from "../../src/server/member.js";
import { encodeRaftRequest, type ProposedRequest } from "../../src/server/raft_request.js";
import { memberStores } from "./stores.js";

const b = (s: string) => Buffer.from(s);
const M1: Member = { id: 0x11n, name: "n1", peerUrls: ["http://127.0.0.1:1"], clientUrls: [], isLearner: false };
const M2: Member = { id: 0x22n, name: "n2", peerUrls: ["http://127.0.0.1:2"], clientUrls: [], isLearner: false };

function setup() {
  const { kv, lessor, alarms, auth, tokens, membership } = memberStores();
  const confChanges: ConfChangeV2[] = [];
  let membershipChanges = 0;
  const applier = new Applier({
    kv,
    lessor,
    membership,
    alarms,
    auth,
    tokens,
    logger: silentLogger(),
    initialMembers: new Map([[M1.id, M1]]),
    applyConfChange: (cc): ConfState => {
      confChanges.push(cc);
      return { voters: cc.changes.map((c) => c.nodeId), learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
    },
    onMembershipChange: () => membershipChanges++,
  });
  let index = 0;
  const entry = (req: ProposedRequest | null, id = 1000 + index + 1): Entry => ({
    index: ++index,
    term: 1,
    type: EntryType.Normal,
    data: req === null ? new Uint8Array(0) : encodeRaftRequest({ ID: id, ...req }),
  });
  const apply = (req: ProposedRequest | null) => applier.apply(entry(req));
  return { kv, lessor, alarms, membership, applier, apply, entry, confChanges, membershipChanges: () => membershipChanges };
}

function confChangeEntry(index: number, changes: ConfChangeV2["changes"], context: Uint8Array = new Uint8Array(0)): Entry {
  const cc: ConfChangeV2 = { transition: ConfChangeTransition.Auto, changes, context };
  return { index, term: 1, type: EntryType.ConfChangeV2, data: encodeConfChangeV2(cc) };
}

describe("applier", () => {
  it("applies a kv request once: the outcome goes to the proposer's id, a replayed entry is skipped", () => {
    const { kv, applier, entry } = setup();
    const e = entry({ put: { key: b("a"), value: b("1") } }, 77);
    const r = applier.apply(e);
    expect(r?.id).toBe(77);
    expect(r?.outcome.revision).toBe(2);
    expect(r?.outcome.error).toBeUndefined();
    expect(applier.apply(e)).toBeUndefined();
    expect(kv.currentRevision()).toBe(2);
    expect(kv.consistentIndex()).toBe(1);
  });

  it("a new leader's empty entry only advances the consistent index", () => {
    const { kv, apply } = setup();
    expect(apply(null)).toBeUndefined();
    expect(kv.consistentIndex()).toBe(1);
    expect(kv.currentRevision()).toBe(1);
  });

  it("a store's error is the entry's outcome, and the entry still counts as applied", () => {
    const { kv, apply } = setup();
    const future = apply({ compaction: { revision: 100 } });
    expect(future?.outcome.error?.message).toBe("etcdserver: mvcc: required revision is a future revision");
    const unknownLease = apply({ leaseRevoke: { ID: 5 } });
    expect(unknownLease?.outcome.error?.message).toBe("etcdserver: requested lease not found");
    expect((unknownLease?.outcome.error as { code?: number }).code).toBe(5);
    expect(kv.consistentIndex()).toBe(2);
  });

  it("lease grant, attach through a put, and revoke deleting the key in one revision", () => {
    const { kv, lessor, apply } = setup();
    const g = apply({ leaseGrant: { ID: 9, TTL: 60 } });
    expect(g?.outcome.response).toEqual({ ID: 9, TTL: 60, error: "" });
    apply({ put: { key: b("k"), value: b("v"), lease: 9 } });
    apply({ put: { key: b("j"), value: b("v"), lease: 9 } });
    expect(lessor.timeToLive(9, { keys: true }).keys.length).toBe(2);
    const before = kv.currentRevision();
    const revoked = apply({ leaseRevoke: { ID: 9 } });
    expect(revoked?.outcome.revision).toBe(before + 1);
    expect(kv.range({ key: b("a"), rangeEnd: b("z") }).count).toBe(0);
    apply({ leaseCheckpoint: { checkpoints: [] } });
    expect(lessor.leases()).toEqual([]);
  });

  it("under NOSPACE refuses puts, put-carrying txns and lease grants, lets deletes through, until disarmed", () => {
    const { kv, alarms, apply } = setup();
    apply({ put: { key: b("a"), value: b("1") } });
    const on = apply({ alarm: { action: AlarmAction.ACTIVATE, memberID: 0x11n, alarm: AlarmType.NOSPACE } });
    expect(on?.outcome.response).toEqual({ alarms: [{ memberID: 0x11n, alarm: AlarmType.NOSPACE }] });
    expect(apply({ alarm: { action: AlarmAction.ACTIVATE, memberID: 0x11n, alarm: AlarmType.NOSPACE } })?.outcome.response).toEqual({ alarms: [] });
    const noSpace = "etcdserver: mvcc: database space exceeded";
    expect(apply({ put: { key: b("b"), value: b("2") } })?.outcome.error?.message).toBe(noSpace);
    const nestedPut = { success: [{ requestTxn: { success: [{ requestPut: { key: b("c"), value: b("3") } }] } }] };
    expect(apply({ txn: nestedPut })?.outcome.error?.message).toBe(noSpace);
    expect(apply({ leaseGrant: { ID: 3, TTL: 60 } })?.outcome.error?.message).toBe(noSpace);
    const readOnlyTxn = apply({ txn: { success: [{ requestRange: { key: b("a") } }] } });
    expect(readOnlyTxn?.outcome.error).toBeUndefined();
    expect(apply({ deleteRange: { key: b("a") } })?.outcome.error).toBeUndefined();
    expect(kv.range({ key: b("a"), rangeEnd: b("z") }).count).toBe(0);
    apply({ alarm: { action: AlarmAction.DEACTIVATE, memberID: 0x11n, alarm: AlarmType.NOSPACE } });
    expect(alarms.list()).toEqual([]);
    expect(apply({ put: { key: b("b"), value: b("2") } })?.outcome.error).toBeUndefined();
    expect(kv.consistentIndex()).toBe(10);
  });

  it("conf changes: raft sees every one, replayed ones too; the membership changes once; the proposer gets the members", () => {
    const s = setup();
    const add1 = confChangeEntry(1, [{ type: ConfChangeType.AddNode, nodeId: M1.id }]);
    expect(s.applier.apply(add1)).toBeUndefined();
    expect(s.membership.list()).toEqual([M1]);
    const ctx = encodeConfChangeContext({ requestId: 7, member: { ...M2, isLearner: true }, isPromote: false });
    const added = s.applier.apply(confChangeEntry(2, [{ type: ConfChangeType.AddLearnerNode, nodeId: M2.id }], ctx));
    expect(added?.id).toBe(7);
    expect(added?.outcome.response).toEqual([M1, { ...M2, isLearner: true }]);
    expect(s.membership.get(M2.id)?.isLearner).toBe(true);
    const promote = encodeConfChangeContext({ requestId: 8, member: M2, isPromote: true });
    expect(s.applier.apply(confChangeEntry(3, [{ type: ConfChangeType.AddNode, nodeId: M2.id }], promote))?.id).toBe(8);
    expect(s.membership.get(M2.id)?.isLearner).toBe(false);
    expect(s.membershipChanges()).toBe(3);
    // Replayed after a restart: raft's configuration is rebuilt, the stored membership is not touched.
    s.applier.apply(add1);
    expect(s.confChanges.length).toBe(4);
    expect(s.membershipChanges()).toBe(3);
    s.applier.apply(confChangeEntry(4, [{ type: ConfChangeType.RemoveNode, nodeId: M2.id }]));
    expect(s.membership.isRemoved(M2.id)).toBe(true);
    expect(() => s.applier.apply(confChangeEntry(5, [{ type: ConfChangeType.AddNode, nodeId: 0x33n }]))).toThrow(/no member record/);
  });

  it("a conf change the membership refuses never reaches raft, not even when replayed, and its proposer gets etcd's error", () => {
    const s = setup();
    s.applier.apply(confChangeEntry(1, [{ type: ConfChangeType.AddNode, nodeId: M1.id }]));
    const unknown = encodeConfChangeContext({ requestId: 9, member: { ...M2, id: 0x44n }, isPromote: false });
    const removeUnknown = confChangeEntry(2, [{ type: ConfChangeType.RemoveNode, nodeId: 0x44n }], unknown);
    expect(s.applier.apply(removeUnknown)?.outcome.error?.message).toBe("etcdserver: member not found");
    const samePeer = encodeConfChangeContext({ requestId: 10, member: { ...M2, peerUrls: M1.peerUrls }, isPromote: false });
    expect(s.applier.apply(confChangeEntry(3, [{ type: ConfChangeType.AddNode, nodeId: M2.id }], samePeer))?.outcome.error?.message).toBe(
      "etcdserver: Peer URLs already exists",
    );
    const promoteVoter = encodeConfChangeContext({ requestId: 11, member: M1, isPromote: true });
    expect(s.applier.apply(confChangeEntry(4, [{ type: ConfChangeType.AddNode, nodeId: M1.id }], promoteVoter))?.outcome.error?.message).toBe(
      "etcdserver: can only promote a learner member",
    );
    expect(s.confChanges.length).toBe(1);
    expect(s.membership.wasRefused(2) && s.membership.wasRefused(3) && s.membership.wasRefused(4)).toBe(true);
    s.applier.apply(removeUnknown); // replayed
    expect(s.confChanges.length).toBe(1);
    expect(s.membership.list()).toEqual([M1]);
  });

  it("a published member's attributes reach the membership", () => {
    const s = setup();
    s.applier.apply(confChangeEntry(1, [{ type: ConfChangeType.AddNode, nodeId: M1.id }]));
    s.entry(null); // keep the helper's index in step with the conf change above
    const r = s.apply({ memberAttributes: { member_ID: M1.id, name: "n1", clientUrls: ["http://127.0.0.1:2379"] } });
    expect(r?.outcome.error).toBeUndefined();
    expect(s.membership.get(M1.id)?.clientUrls).toEqual(["http://127.0.0.1:2379"]);
  });

  it("answers a publication whose entry the backend already holds (caught up by a snapshot image copied after it), without applying it again", () => {
    const s = setup();
    s.applier.apply(confChangeEntry(1, [{ type: ConfChangeType.AddNode, nodeId: M1.id }]));
    s.entry(null);
    const held = s.entry({ memberAttributes: { member_ID: M1.id, name: "old", clientUrls: ["http://127.0.0.1:1"] } }, 4242);
    const put = s.entry({ put: { key: b("k"), value: b("v") } }, 4243);
    // The image: everything up to the put applied, with newer attributes than the held entry's.
    s.kv.markApplied(put.index, put.term);
    s.membership.setAttributes(M1.id, "n1", ["http://127.0.0.1:2379"]);
    const r = s.applier.apply(held);
    expect(r?.id).toBe(4242);
    expect(r?.outcome.error).toBeUndefined();
    expect(s.membership.get(M1.id)?.clientUrls).toEqual(["http://127.0.0.1:2379"]);
    // A client request the backend holds is still not answered again (etcd leaves it to time out).
    expect(s.applier.apply(put)).toBeUndefined();
  });
});
