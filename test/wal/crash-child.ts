/**
 * Crash-test child: opens the WAL, then saves forever with several saves in flight, announcing
 * each save before issuing it ("try") and each acknowledgement after it resolved ("ack"). The
 * parent SIGKILLs it at a random moment. stdout is a pipe, written synchronously on Linux, so an
 * "ack" line printed is an ack the parent will see.
 *
 * Usage: crash-child.ts <dir> <seed> <snapIndex> <snapTerm> <segmentSizeBytes>
 * Lines: ready <lastIndex>
 *        try <id> E <start> <count> <term> <hsTerm> <hsVote> <hsCommit> <size,size,...>
 *        try <id> S <index> <term>
 *        ack <id>
 *        warn <message> <json>   (e.g. a torn tail repaired on open)
 */
import { EntryType, type Entry } from "../../src/raft/types.js";
import { WAL } from "../../src/wal/wal.js";
import { emptyConfState } from "../../src/raft/types.js";
import { entryData, prng } from "./helpers.js";

const [dir, seedArg, snapIndexArg, snapTermArg, segArg] = process.argv.slice(2);
const seed = Number(seedArg);
const snap = { index: Number(snapIndexArg), term: Number(snapTermArg) };
const opts = { segmentSizeBytes: Number(segArg), maxWals: 3 };
const rand = prng(seed);
const int = (n: number): number => Math.floor(rand() * n);

function out(line: string): void {
  process.stdout.write(`${line}\n`);
}

async function main(): Promise<void> {
  const logger = {
    info: () => {},
    warn: (obj: Record<string, unknown>, msg: string) => out(`warn ${msg} ${JSON.stringify(obj)}`),
    error: (obj: Record<string, unknown>, msg: string) => out(`error ${msg} ${JSON.stringify(obj)}`),
  };
  const { wal, entries, hardState } = await WAL.open(dir!, snap, { ...opts, logger });
  // terms[i] = term of entry i as this process has issued it (the accepted log).
  const terms: number[] = [];
  terms[snap.index] = snap.term;
  for (const e of entries) terms[e.index] = e.term;
  let lastIndex = snap.index + entries.length;
  let term = Math.max(hardState.term, terms[lastIndex] ?? 0, 1);
  let commit = hardState.commit;
  let nextId = 0;
  const concurrency = 1 + int(16);
  out(`ready ${lastIndex}`);

  const issue = (): Promise<void> => {
    const id = nextId++;
    if (commit > snap.index && rand() < 0.03) {
      const marker = { index: commit, term: terms[commit]!, confState: emptyConfState() };
      out(`try ${id} S ${marker.index} ${marker.term}`);
      return wal.saveSnapshotMarker(marker).then(async () => {
        out(`ack ${id}`);
        await wal.releaseTo(marker.index);
      });
    }
    let start = lastIndex + 1;
    if (lastIndex > commit && rand() < 0.08) {
      term++;
      start = commit + 1 + int(lastIndex - commit);
    }
    // Now and then a big save (~1.5 MiB): its pwrite spans hundreds of pages, so a kill aimed
    // at it can land mid-write and leave a torn tail for the next open to repair.
    const big = rand() < 0.03;
    const count = big ? 64 : 1 + int(8);
    const sizes: number[] = [];
    const batch: Entry[] = [];
    for (let k = 0; k < count; k++) {
      const size = big ? 24_000 : rand() < 0.05 ? 3000 + int(3000) : int(400);
      sizes.push(size);
      batch.push({ index: start + k, term, type: EntryType.Normal, data: entryData(start + k, term, size) });
      terms[start + k] = term;
    }
    lastIndex = start + count - 1;
    commit = Math.max(commit, lastIndex - 30);
    const hs = { term, vote: 1n, commit };
    out(`try ${id} E ${start} ${count} ${term} ${hs.term} ${hs.vote} ${hs.commit} ${sizes.join(",")}`);
    return wal.save(hs, batch).then(() => out(`ack ${id}`));
  };

  const worker = async (): Promise<void> => {
    for (;;) await issue();
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

main().catch((err: unknown) => {
  process.stderr.write(`crash-child failed: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
