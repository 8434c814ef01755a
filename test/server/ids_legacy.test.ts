/**
 * Ids over all 64 bits in every place a member stores or sends them, and data written before ids
 * were exact (ids below 2^52 as JavaScript numbers) still read as the same ids.
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Backend } from "../../src/backend/backend.js";
import { Alarms, AlarmType } from "../../src/server/alarms.js";
import { decodeConfChangeContext, encodeConfChangeContext } from "../../src/server/conf_change_context.js";
import type { Member } from "../../src/server/member.js";
import { Membership } from "../../src/server/membership.js";
import { decodeMembersInfo } from "../../src/server/transport/protocol.js";

const HIGH = 0x8e9e05c52164694dn; // etcd's default member id: the top bit set
const MAX = 2n ** 64n - 1n;
const LEGACY = 0x0e05c52164694d; // what etcetera stored before: the low 52 bits, a number

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function tempDb(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "ids-legacy-"));
  dirs.push(dir);
  return path.join(dir, "db");
}

const member = (id: bigint): Member => ({ id, name: `m${id}`, peerUrls: [`http://127.0.0.1:${Number(id % 60000n) + 1}`], clientUrls: [], isLearner: false });

describe("backend tables hold uint64 ids exactly", () => {
  it("members, removed members and alarms round-trip ids of 2^63 and above through a reopen", () => {
    const db = tempDb();
    let backend = Backend.open(db);
    let membership = new Membership(backend, HIGH);
    let alarms = new Alarms(backend);
    membership.add(member(HIGH));
    membership.add(member(MAX));
    membership.add(member(7n));
    membership.remove(MAX);
    alarms.activate(HIGH, AlarmType.NOSPACE);
    backend.forceCommit();
    backend.close();

    backend = Backend.open(db);
    membership = new Membership(backend, HIGH);
    alarms = new Alarms(backend);
    expect(membership.list().map((m) => m.id)).toEqual([7n, HIGH]);
    expect(membership.get(HIGH)?.name).toBe(`m${HIGH}`);
    expect(membership.isRemoved(MAX)).toBe(true);
    expect(alarms.list()).toEqual([{ memberID: HIGH, alarm: AlarmType.NOSPACE }]);
    backend.close();
  });

  it("rows written before ids were exact (a number below 2^52) read as the same ids", () => {
    const db = tempDb();
    let backend = Backend.open(db);
    new Membership(backend, 1n);
    new Alarms(backend);
    backend.forceCommit();
    const old = JSON.stringify({ name: "n1", peerUrls: ["http://127.0.0.1:2380"], clientUrls: [], isLearner: false });
    backend.connection.prepare("INSERT INTO members (id, value) VALUES (?, ?)").run(LEGACY, Buffer.from(old));
    backend.connection.prepare("INSERT INTO members_removed (id) VALUES (?)").run(LEGACY + 1);
    backend.connection.prepare("INSERT INTO alarms (member_id, alarm) VALUES (?, ?)").run(LEGACY, AlarmType.CORRUPT);
    backend.close();

    backend = Backend.open(db);
    const membership = new Membership(backend, 1n);
    const alarms = new Alarms(backend);
    expect(membership.list().map((m) => m.id)).toEqual([BigInt(LEGACY)]);
    expect(membership.isRemoved(BigInt(LEGACY + 1))).toBe(true);
    expect(alarms.list()).toEqual([{ memberID: BigInt(LEGACY), alarm: AlarmType.CORRUPT }]);
    backend.close();
  });
});

describe("conf change contexts", () => {
  it("carry a 64-bit member id exactly", () => {
    const ctx = { requestId: 5, member: member(MAX), isPromote: false };
    expect(decodeConfChangeContext(encodeConfChangeContext(ctx))).toEqual(ctx);
  });

  it("written before ids were exact (the id a JSON number) still decode", () => {
    const old = JSON.stringify({ requestId: 9, member: { id: LEGACY, name: "n2", peerUrls: ["http://127.0.0.1:2"], clientUrls: [], isLearner: true }, isPromote: false });
    expect(decodeConfChangeContext(Buffer.from(old))?.member.id).toBe(BigInt(LEGACY));
  });

  it("refuse an id that is no uint64", () => {
    const bad = (id: unknown) => Buffer.from(JSON.stringify({ requestId: 1, member: { id, peerUrls: [] } }));
    expect(() => decodeConfChangeContext(bad((2n ** 64n).toString()))).toThrow(/malformed member record/);
    expect(() => decodeConfChangeContext(bad(-1))).toThrow(/malformed member record/);
    expect(() => decodeConfChangeContext(bad("0x10"))).toThrow(/malformed member record/);
  });
});

describe("the members JSON peers exchange", () => {
  it("reads hex ids and, from a member that predates exact ids, numbers", () => {
    const info = (clusterId: unknown, id: unknown) =>
      Buffer.from(JSON.stringify({ clusterId, members: [{ id, name: "n1", peerURLs: ["http://127.0.0.1:1"], clientURLs: [], isLearner: false }] }));
    expect(decodeMembersInfo(info("8e9e05c52164694d", "ffffffffffffffff"))).toMatchObject({ clusterId: HIGH, members: [{ id: MAX }] });
    expect(decodeMembersInfo(info(LEGACY, LEGACY))).toMatchObject({ clusterId: BigInt(LEGACY), members: [{ id: BigInt(LEGACY) }] });
    expect(() => decodeMembersInfo(info("zz", 1))).toThrow(/malformed members info/);
  });
});
