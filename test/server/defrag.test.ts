/**
 * defrag.ts: a leader hands leadership to the most up-to-date active voter before it vacuums and
 * vacuums only once the transfer took (or failed); a follower or a lone voter vacuums at once.
 */
import { describe, expect, it } from "vitest";
import { Writable } from "node:stream";
import { defragment, transfereeForDefrag, type DefragOptions } from "../../src/server/defrag.js";
import { createLogger } from "../../src/server/logger.js";
import type { NodeId } from "../../src/raft/types.js";

/** Member ids as small numbers here (NodeId is a bigint). */
function setup(o: { leader: boolean; voters: number[]; learners?: number[]; match: Record<number, number>; inactive?: number[]; transferFails?: boolean }) {
  const events: string[] = [];
  const lines: Array<Record<string, unknown>> = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split("\n").filter(Boolean)) lines.push(JSON.parse(l) as Record<string, unknown>);
      cb();
    },
  });
  const progress = new Map<NodeId, { match: number }>(Object.entries(o.match).map(([id, match]) => [BigInt(id), { match }]));
  const opts: DefragOptions = {
    memberId: 1n,
    status: () => ({
      config: { voters: o.voters.map(BigInt), learners: (o.learners ?? []).map(BigInt), votersOutgoing: [], learnersNext: [], autoLeave: false },
      progress: o.leader ? (progress as never) : undefined,
    }),
    isActive: (id) => !(o.inactive ?? []).includes(Number(id)),
    moveLeader: async (to) => {
      events.push(`move ${to}`);
      await new Promise((r) => setTimeout(r, 5));
      if (o.transferFails) throw new Error("etcdserver: request timed out, leader transfer took too long");
      events.push(`moved ${to}`);
    },
    backend: { path: "/d/db", sizeBytes: () => 100, sizeInUseBytes: () => 10 },
    vacuum: () => {
      events.push("vacuum");
      return { sizeBeforeBytes: 100, sizeAfterBytes: 10 };
    },
    logger: createLogger({ destination }),
  };
  return { opts, events, lines };
}

describe("defrag", () => {
  it("the leader hands leadership to the active voter furthest along, then vacuums", async () => {
    const { opts, events, lines } = setup({ leader: true, voters: [1, 2, 3, 4], learners: [5], match: { 1: 90, 2: 80, 3: 85, 4: 89, 5: 95 }, inactive: [4] });
    expect(transfereeForDefrag(opts)).toBe(3n);
    await defragment(opts);
    expect(events).toEqual(["move 3", "moved 3", "vacuum"]);
    const moved = lines.find((l) => l.msg === "transferring leadership before defragment");
    expect(moved).toMatchObject({ level: "info", from: "0000000000000001", to: "0000000000000003" });
    expect(String(moved?.reason)).toContain("election");
    expect(lines.map((l) => l.msg)).toEqual(["starting defragment", "transferring leadership before defragment", "defragmenting", "defragmented", "finished defragment"]);
  });

  it("a follower, or a leader with no other active voter, vacuums at once", async () => {
    for (const s of [
      setup({ leader: false, voters: [1, 2, 3], match: {} }),
      setup({ leader: true, voters: [1], learners: [2], match: { 1: 9, 2: 9 } }),
      setup({ leader: true, voters: [1, 2], match: { 1: 9, 2: 9 }, inactive: [2] }),
    ]) {
      await defragment(s.opts);
      expect(s.events).toEqual(["vacuum"]);
    }
  });

  it("a failed transfer is logged and the defrag still runs", async () => {
    const { opts, events, lines } = setup({ leader: true, voters: [1, 2, 3], match: { 1: 9, 2: 9, 3: 8 }, transferFails: true });
    await defragment(opts);
    expect(events).toEqual(["move 2", "vacuum"]);
    expect(lines.find((l) => l.level === "warn")?.msg).toBe("leadership transfer before defragment failed; defragmenting as leader");
  });
});
