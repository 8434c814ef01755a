/**
 * A follower far behind catches up by a streamed snapshot in a 3-member cluster while writes go
 * on, and no acknowledged write is lost (ReadBack: every acknowledged put read back on every
 * member at its revision). Also with the transfer cut by a SIGKILL: of the receiver the moment it
 * starts receiving, or of the sender the moment it has its image ready. A cut never installs a
 * partial database: the member restarts on its old backend (its partial file removed), catches
 * up by another snapshot, and ends with the same HashKV as the others; no temporary image is left
 * in any member's snap directory.
 *
 * Real processes (dist/server.js), real sockets; each case on a fresh cluster.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Cluster, eventually, type Member, sleep } from "../e2e/harness.js";
import { EtcdConnection } from "./etcd_client.js";
import type { Operation } from "./history.js";
import { type MemberReader, ReadBack, type ReadAt } from "./readback.js";

let cluster: Cluster | undefined;
const conns: EtcdConnection[] = [];
afterEach(async () => {
  for (const c of conns.splice(0)) c.close();
  await cluster?.destroy();
  cluster = undefined;
});

const BIG_VALUES = 240; // 64 KiB each: a 15 MiB backend, streamed in 1 MiB chunks
const WRITES_WHILE_DOWN = 400; // past --snapshot-count 100 and 50 catch-up entries: the log no longer reaches the follower
const TIMEOUT_MS = 5_000;

type Cut = "none" | "receiver" | "sender";

function snapDir(m: Member): string {
  return join(m.spec.dataDir, "member", "snap");
}

/** Temporary images or deltas (being sent or received) and staged ones not installed, in a member's snap directory. */
function leftovers(m: Member): string[] {
  const dir = snapDir(m);
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => f.endsWith(".db.tmp") || f.endsWith(".snap.db") || f.endsWith(".snap.db.tmp") || f.endsWith(".snap.delta"));
}

async function metric(m: Member, name: string): Promise<number> {
  const text = await (await fetch(`${m.clientUrl}/metrics`, { signal: AbortSignal.timeout(5_000) })).text();
  let sum = 0;
  for (const x of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+]+)$`, "gm"))) sum += Number(x[1]);
  return sum;
}

/** Resolves when `line` appears in the member's log after `from` characters (polled every 2 ms). */
async function logLine(m: Member, line: string, from: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!m.log.slice(from).includes(line)) {
    if (Date.now() > deadline) throw new Error(`${m.spec.name} did not log "${line}" within ${timeoutMs} ms:\n${m.log.slice(-3000)}`);
    await sleep(2);
  }
}

/** Puts from `clients` writers over every endpoint until stopped; acknowledged ones go into `ops`. */
function startWriters(endpoints: EtcdConnection[], ops: Operation[], clients: number): { stop(): Promise<void>; acked(): number } {
  let running = true;
  let nextId = 0;
  const loops = Array.from({ length: clients }, async (_, c) => {
    for (let i = 0; running; i++) {
      const conn = endpoints[(c + i) % endpoints.length]!;
      const op = { kind: "put" as const, key: `w/${(c * 7 + i) % 40}`, value: `c${c}-${i}` };
      const call = performance.now();
      try {
        const result = await conn.execute(op, TIMEOUT_MS);
        ops.push({ id: nextId++, clientId: c, op, call, ret: performance.now(), result });
      } catch {
        await sleep(50); // not acknowledged: a leader change, or the member is down
      }
    }
  });
  return {
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
    acked: () => ops.length,
  };
}

async function leaderOf(members: readonly Member[], conns: readonly EtcdConnection[]): Promise<number> {
  return eventually(async () => {
    const ids = await Promise.all(conns.map(async (c) => (await c.status(TIMEOUT_MS).catch(() => undefined))?.memberId));
    for (const c of conns) {
      const s = await c.status(TIMEOUT_MS).catch(() => undefined);
      if (s === undefined || s.leader === "0") continue;
      const i = ids.indexOf(s.leader);
      if (i >= 0 && members[i]!.running) return i;
    }
    return undefined;
  }, 30_000, "a leader");
}

async function runCatchUp(cut: Cut): Promise<void> {
  cluster = await Cluster.create({
    size: 3,
    extraArgs: ["--heartbeat-interval=50", "--election-timeout=500", "--snapshot-count=100", "--experimental-snapshot-catchup-entries=50"],
  });
  await cluster.start();
  const members = cluster.members;
  const cs = members.map((m) => new EtcdConnection(m.endpoint));
  conns.push(...cs);
  const lead = await leaderOf(members, cs);
  const value = "v".repeat(64 * 1024);
  for (let i = 0; i < BIG_VALUES; i++) await eventually(async () => (await cs[lead]!.execute({ kind: "put", key: `big/${i}`, value }, TIMEOUT_MS)) && true, 30_000, `big put ${i}`);

  const fi = [0, 1, 2].find((i) => i !== lead)!;
  const follower = members[fi]!;
  await follower.kill("SIGKILL");
  const ops: Operation[] = [];
  const live = cs.filter((_, i) => i !== fi);
  const writers = startWriters(live, ops, 4);
  try {
    await eventually(async () => (writers.acked() >= WRITES_WHILE_DOWN ? true : undefined), 120_000, `${WRITES_WHILE_DOWN} writes while the follower is down`);

    // The follower comes back; writes go on meanwhile (now over every endpoint).
    const sender = members[lead]!;
    const logFrom = { sender: sender.log.length, follower: follower.log.length };
    follower.start();
    if (cut === "receiver") {
      await logLine(follower, "receiving database snapshot", logFrom.follower, 60_000);
      await follower.kill("SIGKILL");
      const cutMidway = !follower.log.slice(logFrom.follower).includes("received and delivered incoming snapshot");
      console.log(`[snapshot catch-up] receiver killed ${cutMidway ? "during" : "after"} the transfer; files then: ${leftovers(follower).join(", ") || "none"}`);
      await sleep(500);
      follower.start();
    } else if (cut === "sender") {
      await logLine(sender, "created database snapshot image to send", logFrom.sender, 60_000);
      await sender.kill("SIGKILL");
      console.log(`[snapshot catch-up] sender (leader ${sender.spec.name}) killed with its image ready; its files then: ${leftovers(sender).join(", ") || "none"}`);
    }
    await follower.waitReady(60_000);
    await eventually(async () => ((await metric(follower, "etcd_network_snapshot_receive_success").catch(() => 0)) >= 1 ? true : undefined), 120_000, "the follower receives a snapshot");
    if (cut === "sender") {
      await sleep(500);
      sender.start();
      await sender.waitReady(60_000);
    }
    const before = writers.acked();
    await eventually(async () => (writers.acked() >= before + 100 ? true : undefined), 60_000, "writes after the catch-up");
  } finally {
    await writers.stop();
  }

  // Every acknowledged write, on every member, at its revision.
  const readers: MemberReader[] = members.map((m, i) => ({
    name: m.spec.name,
    localRevision: () => cs[i]!.localRevision("w/", TIMEOUT_MS),
    readAt: async (reads) => (await cs[i]!.readAt(reads, TIMEOUT_MS)).map((kv): ReadAt => (kv === null ? { kind: "absent" } : { kind: "kv", ...kv })),
  }));
  const readBack = new ReadBack(readers);
  readBack.follow(ops);
  // Failed twice in one clean CI run at load ~30 (not reproduced since): a timeout says which member
  // held which writes back, how far each had applied, and what the follower last logged.
  await eventually(async () => {
    await readBack.sweep();
    return readBack.pendingCount() === 0 ? true : undefined;
  }, 60_000, "every write read back on every member").catch(async (e: unknown) => {
    const revisions = await Promise.all(cs.map((c) => c.localRevision("w/", TIMEOUT_MS).catch((err: unknown) => String(err))));
    throw new Error(
      `${String(e)}; pending by member ${JSON.stringify(readBack.pendingByMember())}, lowest pending revision ${readBack.lowestPending()}, ` +
        `applied revisions ${members.map((m, i) => `${m.spec.name}=${revisions[i]}`).join(" ")}; follower ${follower.spec.name} last logged:\n${follower.log.slice(-3000)}`,
    );
  });
  expect(readBack.writes).toBeGreaterThan(WRITES_WHILE_DOWN);
  expect(readBack.lost, readBack.lost.slice(0, 5).join("\n")).toEqual([]);
  expect(readBack.unverified).toEqual([]);

  // Same contents everywhere, and no image left behind.
  const rev = Math.max(...(await Promise.all(cs.map((c) => c.localRevision("w/", TIMEOUT_MS)))));
  const hashes = await Promise.all(
    cs.map(async (c) => {
      await eventually(async () => ((await c.localRevision("w/", TIMEOUT_MS)) >= rev ? true : undefined), 30_000, "member at the last revision");
      return (await c.hashKV(rev, TIMEOUT_MS)).hash;
    }),
  );
  expect(new Set(hashes).size, `HashKV at ${rev}: ${hashes.join(", ")}`).toBe(1);
  await eventually(async () => (members.every((m) => leftovers(m).length === 0) ? true : undefined), 30_000, "no temporary or staged image left").catch((e: unknown) => {
    throw new Error(`${String(e)}: ${members.map((m) => `${m.spec.name}: ${leftovers(m).join(", ") || "none"}`).join("; ")}\n${members.map((m) => `==== ${m.spec.name}\n${m.log.slice(-1500)}`).join("\n")}`);
  });
  const big = await cs[fi]!.readAt([{ key: `big/${BIG_VALUES - 1}`, revision: rev }], TIMEOUT_MS);
  expect(big[0]?.value.length).toBe(64 * 1024);
}

describe("a follower far behind catches up by a streamed snapshot while writes continue", () => {
  it("no acknowledged write lost, same HashKV everywhere", { timeout: 240_000 }, async () => {
    await runCatchUp("none");
  });
  it("the receiver SIGKILLed as the transfer starts: restarts on its old backend, catches up, nothing lost", { timeout: 240_000 }, async () => {
    await runCatchUp("receiver");
  });
  it("the sender (leader) SIGKILLed with its image ready: the new leader sends one, nothing lost", { timeout: 240_000 }, async () => {
    await runCatchUp("sender");
  });
});
