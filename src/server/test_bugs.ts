/**
 * TEST-ONLY bugs a member can be started with, so that the chaos checker's mutation test can show
 * it catches a server-side consistency bug (test/reliability/chaos.test.ts). Read once at start
 * from ETCETERA_TEST_BUG; refused unless ETCETERA_TEST_BUGS_ALLOWED=1 is set too, so a stray
 * variable cannot break a real member; logged at error level on start when active.
 *
 * - follower-local-read: a follower answers linearizable reads (Range, read-only Txn) from its
 *   own state at once, without a ReadIndex round: reads can miss writes the leader has already
 *   acknowledged.
 * - wal-no-sync: the raft WAL writes entries without syncing them, so an acknowledged write can be
 *   in no member's durable storage: a power loss of every member loses it (the power-loss suite's
 *   mutation test, test/powerloss/cluster_crash.test.ts).
 */
import type { ReadIndex } from "./read_index.js";

export const TEST_BUGS = ["follower-local-read", "wal-no-sync"] as const;
export type TestBug = (typeof TEST_BUGS)[number];

export const TEST_BUG_ENV = "ETCETERA_TEST_BUG";
export const TEST_BUGS_ALLOWED_ENV = "ETCETERA_TEST_BUGS_ALLOWED";

/**
 * TEST-ONLY, not a bug: ETCETERA_TEST_DELTA_PAGE_DELAY_MS slows each page of an incremental
 * snapshot's install, so a test can SIGKILL the member inside its transaction. Honoured only with
 * ETCETERA_TEST_BUGS_ALLOWED=1.
 */
export function testDeltaPageDelayMs(env: Readonly<Record<string, string | undefined>>): number | undefined {
  const raw = env.ETCETERA_TEST_DELTA_PAGE_DELAY_MS;
  if (raw === undefined || raw === "" || env[TEST_BUGS_ALLOWED_ENV] !== "1") return undefined;
  const ms = Number(raw);
  return Number.isFinite(ms) && ms > 0 ? ms : undefined;
}

/** The bugs to plant, or why the environment is refused. */
export function testBugsFromEnv(env: Readonly<Record<string, string | undefined>>): { bugs: ReadonlySet<TestBug> } | { error: string } {
  const raw = env[TEST_BUG_ENV];
  if (raw === undefined || raw === "") return { bugs: new Set() };
  if (env[TEST_BUGS_ALLOWED_ENV] !== "1") {
    return { error: `${TEST_BUG_ENV}=${raw} is set but ${TEST_BUGS_ALLOWED_ENV}=1 is not: refusing to start a member with a test-only bug` };
  }
  const bugs = new Set<TestBug>();
  for (const name of raw.split(",").map((s) => s.trim())) {
    if (!(TEST_BUGS as readonly string[]).includes(name)) return { error: `${TEST_BUG_ENV}: unknown test bug "${name}" (known: ${TEST_BUGS.join(", ")})` };
    bugs.add(name as TestBug);
  }
  return { bugs };
}

/**
 * The gate linearizable reads wait at (ReadIndex), with the planted bugs: under
 * follower-local-read, a member that is not the leader lets every read through at once.
 */
export function readGateWithBugs(readIndex: Pick<ReadIndex, "notify">, bugs: ReadonlySet<TestBug>, isLeader: () => boolean): Pick<ReadIndex, "notify"> {
  if (!bugs.has("follower-local-read")) return readIndex;
  return { notify: () => (isLeader() ? readIndex.notify() : Promise.resolve()) };
}
