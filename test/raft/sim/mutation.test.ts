/**
 * The simulator has teeth: a Raft with a planted bug must fail its checks within a few seeds.
 * The bugs are planted from outside src/raft by wrapping methods of each node's Raft instance
 * (SimOptions.mutate), so production code carries no test hook:
 * - "commit without quorum": the leader commits its whole log as soon as it appends, without
 *   waiting for a majority to persist it;
 * - "vote twice": a node forgets its vote before each vote request of its current term, so it can
 *   grant two candidates the same term.
 */
import { describe, expect, it } from "vitest";
import type { RawNode } from "../../../src/raft/rawnode.js";
import { MessageType, NONE, type Message } from "../../../src/raft/types.js";
import { FAULT_STEPS, LIVENESS_STEPS, SimFailure, runSeed } from "./sim.js";

const SEEDS_MAX = 60;

function commitWithoutQuorum(raw: RawNode): void {
  const raft = raw.raft;
  raft.maybeCommit = () => raft.raftLog.maybeCommit(raft.raftLog.lastIndex(), raft.term);
}

function voteTwice(raw: RawNode): void {
  const raft = raw.raft;
  const step = raft.step.bind(raft);
  raft.step = (m: Message) => {
    if (m.type === MessageType.MsgVote && m.term === raft.term && m.from !== raft.vote) {
      raft.vote = NONE;
      raft.lead = NONE;
    }
    step(m);
  };
}

/** Runs seeds 1.. until one fails; returns the seed and the error (undefined: never caught). */
function firstFailure(mutate: (raw: RawNode) => void): { seed: number; error: Error } | undefined {
  for (let seed = 1; seed <= SEEDS_MAX; seed++) {
    try {
      runSeed({ seed, nodes: 3, faultSteps: FAULT_STEPS, livenessSteps: LIVENESS_STEPS, mutate });
    } catch (e) {
      return { seed, error: e as Error };
    }
  }
  return undefined;
}

describe("simulator mutation tests: a broken Raft is caught", () => {
  it("commit without quorum fails a safety check", () => {
    const f = firstFailure(commitWithoutQuorum);
    expect(f, `not caught in ${SEEDS_MAX} seeds`).toBeDefined();
    console.log(`[mutation] commit without quorum: seed ${f!.seed}: ${f!.error.message.split("\n")[0]}`);
    expect(f!.error, String(f!.error.stack)).toBeInstanceOf(SimFailure);
    // Leader Completeness, State Machine Safety or Log Matching: the checks that a lost commit breaks.
    expect(f!.error.message).toMatch(/has term \d+ at committed index|lacks applied index|applied a different entry|state diverged|log matching/);
  });

  it("voting twice in a term fails Election Safety", () => {
    const f = firstFailure(voteTwice);
    expect(f, `not caught in ${SEEDS_MAX} seeds`).toBeDefined();
    console.log(`[mutation] vote twice: seed ${f!.seed}: ${f!.error.message.split("\n")[0]}`);
    expect(f!.error).toBeInstanceOf(SimFailure);
    expect(f!.error.message).toMatch(/two leaders in term \d+/);
  });
});
