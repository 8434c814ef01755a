/**
 * etcetera's Raft core: a pure, deterministic state machine in the style of etcd-io/raft.
 *
 * The application (src/server) drives a RawNode:
 * ```ts
 * const storage = new MemoryStorage();            // or the WAL-backed Storage
 * const node = new RawNode({ id, electionTick: 10, heartbeatTick: 1, storage,
 *   checkQuorum: true, preVote: true, random: Math.random });
 * node.bootstrap([1, 2, 3]);                       // brand-new cluster only
 * every tick interval: node.tick();
 * on a peer message:   node.step(msg);
 * to write:            node.propose(bytes) / node.proposeBatch([...]);  // throws ProposalDroppedError
 * to read:             node.readIndex(ctx);  // -> Ready.readStates
 * while (node.hasReady()) {
 *   const rd = node.ready();
 *   persist rd.hardState, rd.entries, rd.snapshot   (fsync if rd.mustSync)
 *   send rd.messages         (before the persist completes only if rd.canSendBeforePersist)
 *   apply rd.snapshot, then rd.committedEntries (applyConfChange for conf-change entries)
 *   serve rd.readStates once applied ≥ their index
 *   node.advance(rd);
 * }
 * ```
 * See rawnode.ts for the exact Ready contract. src/raft performs no I/O, owns no timers and
 * never reads a clock: time is tick(), randomness is the configured `random`.
 */
export { RawNode, type Ready, type RaftConfig, type Status, type ProgressStatus } from "./rawnode.js";
export { MemoryStorage, cloneConfState } from "./storage.js";
export { RaftInvariantError, RaftUsageError } from "./assert.js";
export {
  confChangeFromEntry,
  decodeConfChangeV1,
  decodeConfChangeV2,
  encodeConfChangeV1,
  encodeConfChangeV2,
  confChangeV1AsV2,
  type ConfChangeV1,
} from "./confchange_codec.js";
export { ProgressState } from "./progress.js";
export type { ReadOnlyOption } from "./read_only.js";
export type { RaftLogger } from "./raft.js";
export * from "./types.js";
