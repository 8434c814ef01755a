/**
 * A follower persists a received snapshot (marker + the hard state committing it) and installs it;
 * then the power goes (issue 20, found by the cluster case "one cut at snapshot-install",
 * seed 1091271884). A restart takes only a marker at or below the durable commit index (etcd's
 * ValidSnapshotEntries), so the hard state must be as durable as the marker: before, it was a
 * commit-only (unsynced) record, lost at the cut, and the member restarted on its old log beside
 * the installed backend, refusing every heartbeat ("tocommit(N) is out of range [lastIndex(M)]").
 * On lazyfs, which drops every unsynced write at the cut.
 */
import { afterAll, describe, expect, it } from "vitest";
import { join } from "node:path";
import v8 from "node:v8";
import vm from "node:vm";
import { silentLogger } from "../../src/server/logger.js";
import { RaftStorage } from "../../src/server/raft_storage.js";
import { EntryType } from "../../src/raft/types.js";
import { LazyFs, scratch, unmountAll } from "./lazyfs.js";

const s = scratch("etcetera-snapshot-marker");

/** V8's full collection without --expose-gc on the command line (the flag is read when a context is created). */
function fullGc(): void {
  v8.setFlagsFromString("--expose-gc");
  (vm.runInNewContext("gc") as () => void)();
}
afterAll(async () => {
  await unmountAll();
  s.remove();
});

const open = (mnt: string) =>
  RaftStorage.open({
    walDir: join(mnt, "member", "wal"),
    snapDir: join(mnt, "member", "snap"),
    memberId: 1n,
    clusterId: 7n,
    maxWals: 0,
    maxSnapshots: 5,
    snapshotCatchUpEntries: 50,
    logger: silentLogger(),
  });

describe("a follower's received snapshot across a power cut", () => {
  it("restarts from the snapshot: its marker and the hard state committing it are durable together", async () => {
    // The member's life up to the cut, in a scope of its own: once it returns nothing holds its
    // handles, so the collection below would find any it left open.
    const live = async (): Promise<string> => {
      const fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt, log: s.log });
      const first = await open(s.mnt);
      const voters = { voters: [1n], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };
      const entries = Array.from({ length: 5 }, (_, i) => ({ term: 1, index: i + 1, type: EntryType.Normal, data: new Uint8Array([i]) }));
      await first.storage.persist({ term: 1, vote: 0n, commit: 5 }, entries, undefined);
      // The Ready of a received snapshot: the snapshot, and a hard state whose commit moved to it.
      const snapshot = { metadata: { index: 300, term: 1, confState: voters }, data: new Uint8Array(0) };
      await first.storage.persist({ term: 1, vote: 0n, commit: 300 }, [], snapshot);
      // The member installs the image now (the backend is at 300, durably); the power goes.
      const dropped = await fs.powerCut();
      // The cut ends the member's process; in this one its handles are released as that death
      // would release them (closing on the dead mount fails with ENOTCONN, as expected here).
      await expect(first.storage.close()).rejects.toThrow(/ENOTCONN/);
      return dropped;
    };
    const dropped = await live();
    // A FileHandle left open fails at the collector, as an uncaught exception in whatever test runs
    // then (it did, in CI on 2026-12-05): collect now, so that it would fail here.
    fullGc();
    await new Promise((r) => setTimeout(r, 50));
    const fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt });
    try {
      const again = await open(s.mnt);
      expect(again.snapshot?.metadata.index, `lazyfs dropped:\n${dropped}`).toBe(300);
      expect(again.storage.memory.initialState().hardState.commit, `lazyfs dropped:\n${dropped}`).toBeGreaterThanOrEqual(300);
      expect(again.storage.memory.lastIndex()).toBe(300);
      await again.storage.close();
    } finally {
      await fs.unmount();
    }
  });
});
