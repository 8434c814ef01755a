/**
 * Raft core throughput: proposals committed per second through a 3-node in-memory cluster
 * (MemoryStorage, no fsync, synchronous in-process network), 256-byte entries.
 *
 *   npx tsx bench/raft.ts [--proposals 60000] [--repeat 3]
 *
 * "batch 1" runs one proposal per Ready cycle (every proposal pays a full Ready round: append,
 * MsgApp per follower, MsgAppResp, commit); larger batches propose that many entries between
 * two Ready cycles, which raft turns into one append and one MsgApp per follower. Followers are
 * driven the same way. This measures the core's CPU cost, not disk or network latency.
 */
import { RawNode, type Ready } from "../src/raft/rawnode.js";
import { MemoryStorage } from "../src/raft/storage.js";
import { decodeConfChangeV2 as confChange } from "../src/raft/confchange_codec.js";
import { MessageType, StateType, type Message } from "../src/raft/types.js";

interface Node {
  raw: RawNode;
  storage: MemoryStorage;
  applied: number;
}

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function newCluster(): Map<bigint, Node> {
  const nodes = new Map<bigint, Node>();
  for (const id of [1n, 2n, 3n]) {
    const storage = new MemoryStorage();
    const raw = new RawNode({
      id,
      electionTick: 10,
      heartbeatTick: 1,
      storage,
      checkQuorum: true,
      preVote: true,
      maxSizePerMsg: 1024 * 1024,
      maxInflightMsgs: 256,
      random: seeded(Number(id)),
    });
    raw.bootstrap([1n, 2n, 3n]);
    nodes.set(id, { raw, storage, applied: 0 });
  }
  return nodes;
}

/** One Ready cycle on every node; returns the messages to deliver. */
function cycle(nodes: Map<bigint, Node>, stats: { msgApp: number; entriesInMsgApp: number; readys: number }): Message[] {
  const out: Message[] = [];
  for (const n of nodes.values()) {
    if (!n.raw.hasReady()) continue;
    const rd: Ready = n.raw.ready();
    stats.readys++;
    if (rd.snapshot !== undefined) n.storage.applySnapshot(rd.snapshot);
    if (rd.entries.length > 0) n.storage.append(rd.entries);
    if (rd.hardState !== undefined) n.storage.setHardState(rd.hardState);
    for (const m of rd.messages) {
      if (m.type === MessageType.MsgApp && m.entries.length > 0) {
        stats.msgApp++;
        stats.entriesInMsgApp += m.entries.length;
      }
      out.push(m);
    }
    for (const e of rd.committedEntries) {
      if (e.type !== 0) n.raw.applyConfChange(confChange(e.data));
      n.applied = e.index;
    }
    n.raw.advance(rd);
  }
  return out;
}

function run(batch: number, proposals: number): { seconds: number; perSec: number; msgApp: number; perMsgApp: number; readys: number } {
  const nodes = newCluster();
  const stats = { msgApp: 0, entriesInMsgApp: 0, readys: 0 };
  const leader = nodes.get(1n);
  if (leader === undefined) throw new Error("no node 1");
  let pending: Message[] = cycle(nodes, stats); // persist and apply the bootstrap entries
  leader.raw.campaign();
  for (let i = 0; i < 20 && leader.raw.raft.state !== StateType.Leader; i++) {
    for (const m of pending) nodes.get(m.to)?.raw.step(m);
    pending = cycle(nodes, stats);
  }
  // Settle the election (no-op committed everywhere).
  for (let i = 0; i < 10; i++) {
    for (const m of pending) nodes.get(m.to)?.raw.step(m);
    pending = cycle(nodes, stats);
  }
  Object.assign(stats, { msgApp: 0, entriesInMsgApp: 0, readys: 0 });
  const payload = new Uint8Array(256).fill(7);
  const start = leader.applied;
  const target = start + proposals;
  let proposed = 0;
  const t0 = performance.now();
  while (leader.applied < target) {
    if (proposed < proposals) {
      const k = Math.min(batch, proposals - proposed);
      if (k === 1) leader.raw.propose(payload);
      else leader.raw.proposeBatch(Array.from({ length: k }, () => payload));
      proposed += k;
    }
    pending = cycle(nodes, stats);
    for (const m of pending) nodes.get(m.to)?.raw.step(m);
    // Compact behind the applied index now and then, as a server would.
    if (leader.applied - leader.storage.firstIndex() > 20000) {
      for (const n of nodes.values()) {
        const idx = n.applied - 1000;
        if (idx > n.storage.firstIndex()) n.storage.compact(idx);
      }
    }
  }
  const seconds = (performance.now() - t0) / 1000;
  return {
    seconds,
    perSec: proposals / seconds,
    msgApp: stats.msgApp,
    perMsgApp: stats.entriesInMsgApp / Math.max(1, stats.msgApp),
    readys: stats.readys,
  };
}

const proposals = arg("proposals", 60000);
const repeat = arg("repeat", 3);
// Warm up the JIT so the first row is not penalized.
run(64, 5000);
const rows: string[][] = [["batch (proposals per Ready)", "proposals", "seconds", "committed/s", "MsgApp w/ entries", "entries/MsgApp"]];
for (const batch of [1, 8, 64, 256]) {
  const n = batch === 1 ? Math.min(proposals, 30000) : proposals;
  // Best of `repeat` runs: the figure of interest is the core's cost, not the machine's load.
  let r = run(batch, n);
  for (let k = 1; k < repeat; k++) {
    const again = run(batch, n);
    if (again.perSec > r.perSec) r = again;
  }
  rows.push([String(batch), String(n), r.seconds.toFixed(2), Math.round(r.perSec).toLocaleString("en-US"), String(r.msgApp), r.perMsgApp.toFixed(1)]);
}
const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => r[i].length)));
console.log("Raft core, 3 nodes in memory, 256-byte entries (node " + process.version + ")");
for (const [i, r] of rows.entries()) {
  console.log("| " + r.map((c, j) => c.padStart(widths[j])).join(" | ") + " |");
  if (i === 0) console.log("|" + widths.map((w) => "-".repeat(w + 2)).join("|") + "|");
}
