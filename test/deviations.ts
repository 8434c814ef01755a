/**
 * Every known difference between etcetera and etcd 3.4.23 that a test knows about, in one place,
 * each with why. Three lists:
 *
 * - FRAME_DEVIATIONS: answers to malformed gRPC on the client port (test/fuzz/grpc_frames.test.ts
 *   fails on a mismatch not listed);
 * - RPC_DEVIATIONS: answers to well-formed requests, code or message (test/fuzz/rpc_fields.test.ts
 *   fails on a difference not listed);
 * - BEHAVIOUR_DEVIATIONS: the places where a test expects something different per target, or
 *   checks a guarantee of etcetera's that etcd does not make; each names the test that carries it
 *   (deviations.test.ts checks that file cites the id).
 *
 * `finding` marks behaviour of ours that should change (a bug or a gap); the others are
 * deliberate or harmless. A deviation that is a bug of ours is not whitelisted here for long: it
 * becomes a failing test and a fix (the int64 revision one did: test/e2e/errors.test.ts).
 * Frame outcomes are outcomeKey() strings ("status:13", "reset:1", "http:404").
 */
import type { FrameCaseKind } from "./fuzz/frame_cases.js";
import type { RpcOp } from "./fuzz/rpc_gen.js";
import { type OpOutcome, outcomeText } from "./fuzz/rpc_runner.js";

export interface Deviation {
  readonly kinds: readonly FrameCaseKind[];
  /** Only for these methods (by name), when set. */
  readonly methods?: readonly string[];
  readonly ours: RegExp;
  readonly etcd: RegExp;
  readonly why: string;
  /** Set when etcetera should change: where the cause is. */
  readonly finding?: string;
}

export const FRAME_DEVIATIONS: readonly Deviation[] = [
  {
    kinds: ["length-beyond-body-open"],
    methods: ["LeaseKeepAlive", "Watch"],
    ours: /^status:2$/,
    etcd: /^status:4$/,
    why:
      'a bidi stream whose message never completes runs into its grpc-timeout: both end it "context deadline exceeded", UNKNOWN as ' +
      "etcd's handler returns the context's error; etcd's handler selects between the context and its receive loop's error, and when " +
      "the receive error wins the race it is grpc-go's own DEADLINE_EXCEEDED",
  },
  // A known field with another wire type is refused (src/pb/codec.ts), as gogoproto does. The
  // only difference left is a field etcd 3.4 does not know yet:
  {
    kinds: ["protobuf:wrong-wire-type"],
    methods: ["MemberList"],
    ours: /^status:13$/,
    etcd: /^status:0$/,
    why:
      "MemberListRequest.linearizable (field 1) is etcd 3.5's; etcd 3.4 has no such field and skips it whatever its wire " +
      "type, etcetera (3.5's API) refuses a wrong wire type for it as 3.5 would",
  },
  {
    kinds: ["wrong-content-type"],
    ours: /^http:404$/,
    etcd: /^reset:1$/,
    why:
      "HTTP/2 request with a non-gRPC content type: etcd's cmux sends all HTTP/2 to grpc-go, which resets the stream (PROTOCOL_ERROR); " +
      "etcetera serves plain HTTP over HTTP/2 too (/metrics, /health) and answers 404 for unknown paths (by design, src/grpc/server.ts)",
  },
  {
    kinds: ["bad-grpc-timeout"],
    ours: /^status:4$/,
    etcd: /^status:2$/,
    why:
      'grpc-timeout "-1S" is a deadline already past on both (Go\'s ParseInt takes the sign): etcetera answers DEADLINE_EXCEEDED; ' +
      'etcd does too, or UNKNOWN "context deadline exceeded" when its handler meets the expired context first (seen with SEED=579594534)',
  },
  {
    kinds: ["bad-grpc-timeout"],
    ours: /^status:0$/,
    etcd: /^reset:1$/,
    why:
      'grpc-timeout " 1S" (leading space) under ETCETERA_HTTP2=node only: nghttp2 hands the server the value trimmed ("1S"), so etcetera runs ' +
      "the call; grpc-go refuses it, and so does etcetera's own HTTP/2 (the default)",
  },
  {
    kinds: [
      "protobuf:truncated-varint",
      "protobuf:length-past-end",
      "protobuf:varint-overflow",
      "protobuf:illegal-wire-type",
      "protobuf:field-zero",
      "protobuf:end-group",
      "protobuf:nested-garbage",
      "protobuf:wrong-wire-type",
      "truncated-prefix",
      "length-beyond-body",
      "length-beyond-body-open",
      "oversized-prefix",
      "compressed-identity",
      "compressed-unknown-encoding",
      "no-message",
    ],
    methods: ["Downgrade"],
    ours: /^status:\d+$/,
    etcd: /^status:12$/,
    why: "Maintenance.Downgrade is etcd 3.5 API: etcd 3.4 answers UNIMPLEMENTED before reading the request",
  },
];

export function findDeviation(kind: FrameCaseKind, method: string, ours: string, etcd: string): Deviation | undefined {
  return FRAME_DEVIATIONS.find(
    (d) => d.kinds.includes(kind) && (d.methods === undefined || d.methods.includes(method)) && d.ours.test(ours) && d.etcd.test(etcd),
  );
}

/**
 * Leaks the fuzzers found (left out of the leak check's mix until fixed; FUZZ_INCLUDE_KNOWN_BUGS=1
 * puts them back to replay them).
 */
export const KNOWN_LEAKS: readonly { readonly path: string; readonly finding: string }[] = [
  // Fixed: a Watch or LeaseKeepAlive call that ended with an error status kept its whole stream,
  // because ctx.signal was never aborted once the call had finished (src/grpc/call.ts onClose now
  // aborts it when the stream closes). Both methods are back in the leak check's mix.
];

export interface RpcDeviation {
  /** "kv.Range", "watch", ... */
  readonly ops: readonly string[];
  readonly ours: RegExp;
  readonly etcd: RegExp;
  readonly why: string;
  readonly finding?: string;
}

export const RPC_DEVIATIONS: readonly RpcDeviation[] = [
  {
    ops: ["cluster.MemberUpdate"],
    ours: /^3 etcdserver: given member URLs are invalid$/,
    etcd: /^0 /,
    why: "etcd's MemberUpdate takes any peer URLs for a known member (none, or unparsable), after which its peers can no longer reach it; etcetera checks them as MemberAdd does",
  },
  // Fixed: membership changes (validated as etcd does: URLs, unknown ids, promote of a voter,
  // removing the last started member), LeaseGrant (TTL checked before proposing), Compact (a revision beyond 2^53 is a future
  // revision), MoveLeader to the leader itself (OK, as etcd), and int64 revisions at 2^63-1 in a
  // write Txn (src/pb/wire.ts writes the nearest int64 instead of wrapping; test/e2e/errors.test.ts),
  // and a watcher dropped by compaction: canceled only for a non-zero compact revision, and its later
  // cancel answered (src/server/api/watch.ts, src/mvcc/watchable_store.ts;
  // test/e2e/watch_compacted_at_zero.test.ts; found with SEED=148622941).
];

function name(op: RpcOp): string {
  return op.kind === "unary" ? `${op.service}.${op.method}` : op.kind;
}


export function findRpcDeviation(op: RpcOp, ours: OpOutcome, etcd: OpOutcome): RpcDeviation | undefined {
  const n = name(op);
  return RPC_DEVIATIONS.find((d) => d.ops.includes(n) && d.ours.test(outcomeText(ours)) && d.etcd.test(outcomeText(etcd)));
}

/** A test that expects something different per target, or checks a guarantee etcd does not make. */
export interface BehaviourDeviation {
  /** The test file that carries it; it cites the id as `deviation: <id>`. */
  readonly where: string;
  readonly etcd: string;
  readonly ours: string;
  readonly why: string;
  readonly finding?: string;
}

export const BEHAVIOUR_DEVIATIONS: Readonly<Record<string, BehaviourDeviation>> = {
  "defrag-leader-hands-off": {
    where: "test/e2e/defrag_under_load.test.ts",
    etcd: "a leader asked to defragment stays leader: its raft goroutines keep heartbeating while the defrag holds its backend",
    ours: "the leader of a cluster with other voters first transfers leadership to the most up-to-date active voter (as etcdctl move-leader), logged at info with the reason, then vacuums as a follower",
    why: "SQLite's VACUUM holds the member's one thread, so a leader vacuuming would send no heartbeats and the cluster would take no writes until an election; handed on, the others keep committing as they do around etcd's defrag",
  },
  "pprof-node-profiles": {
    where: "test/e2e/pprof.test.ts",
    etcd: "--enable-pprof serves Go's net/http/pprof: gzipped protobuf profiles (profile, heap, goroutine, block, mutex, ...)",
    ours: "the same paths serve Node's: /debug/pprof/profile a V8 .cpuprofile (JSON), /debug/pprof/heap a .heapsnapshot, /debug/pprof/allocs?seconds=N a V8 sampling .heapprofile of the next N seconds' allocations (Go's: since the process started); the Go-only profiles answer 501 saying so",
    why: "a Go profile means nothing for a Node process; what a Node profiler (DevTools, speedscope) reads is served at the paths operators already script against",
  },
  "metrics-families-left-out": {
    where: "test/e2e/metrics.test.ts",
    etcd: "/metrics also shows the bbolt commit phases, v2 store, gRPC proxy and open read transaction families, and go_* runtime families",
    ours: "every other family with etcd's name, type, labels, help and buckets (the live key count and heartbeat send failures included); the left-out ones are listed with their reason in the test (ETCD_ONLY), nodejs_* instead of go_*",
    why: "a family without a meaning here (bbolt, v2, proxy, Go runtime) is left out rather than shown as a constant",
  },
  "lock-waiter-lease-expired": {
    where: "test/e2e/lock_election.test.ts",
    etcd: "v3lock Lock whose lease expires while it waits: OK with a key that no longer exists (a lock nobody holds)",
    ours: 'UNKNOWN "session expired", as etcd 3.5\'s Mutex, which checks its key after the wait',
    why: "etcd 3.4's answer hands a client a lock it does not hold; 3.5 fixed it and etcetera follows 3.5 (the test expects each target's exact answer)",
  },
  "long-read-serves-writes": {
    where: "test/fuzz/load_shapes.test.ts",
    etcd: "a read of every row may or may not let writes on other connections through (1 and 77 writes in two runs)",
    ours: "at least 2 writes applied and answered while the read runs (its slices span ~100 event-loop turns; 14-16 measured)",
    why: "a guarantee of etcetera's (a long read never stalls the member), not etcd's: asserted for etcetera only; the read's answer itself is checked on both",
  },
  "lease-ttl-kept-across-leader-change": {
    where: "test/e2e/lease_checkpoint.test.ts",
    etcd: "after move-leader or a leader crash a lease restarts from its full TTL (3.4 checkpoints only leases longer than its fixed 5 min interval, never on a transfer)",
    ours: "the new leader keeps what was left: every lease is checkpointed through raft before a MoveLeader transfer, and periodically per --experimental-lease-checkpoint-interval (etcd 3.5's flag)",
    why: "issue 15: a lease that outlives leader changes by its full TTL each time may never expire; etcd's own long-standing complaint, fixed in 3.5/3.6 by checkpointing",
  },
  "force-new-cluster-keeps-log-tail": {
    where: "test/e2e/force_new_cluster.test.ts",
    etcd: "restartAsStandaloneNode discards the WAL entries past the commit index the WAL holds; a commit-only hard state is still in the WAL's write buffer at a SIGKILL, so the last acknowledged write (applied on the survivor) was lost",
    ours: "every entry of the survivor's log is kept and committed with the appended removals: all acknowledged writes the survivor holds are kept",
    why: "issue 15 asks that force-new-cluster keep every acknowledged write; the discarded tail came from a legitimate leader and may hold writes it acknowledged (the test checks all of them on etcetera, all but the last 10 on etcd)",
  },
  "initial-corrupt-check-compares-peers": {
    where: "test/e2e/corruption.test.ts",
    etcd: "a member restarted with --experimental-initial-corrupt-check on a backend changed on disk logs 'initial corruption checking passed; no corruption' within 1 ms and serves (no peer hash fetched, nothing logged about peers); the leader's periodic check then raises CORRUPT",
    ours: "the member fetches every peer's HashKV at its revision (Maintenance.HashKV on their client URLs), finds the different hash and refuses to start: '<id> found data inconsistency with peers'",
    why: "issue 15 asks the initial check to refuse a corrupted member's start, which is what etcd's corrupt.go means to do; 3.4.23 did not compare with any peer in this setup",
  },
  "corrupt-alarm-member-id": {
    where: "test/e2e/corruption.test.ts",
    etcd: "the leader's periodic check raises CORRUPT for member 0 ('alarm raised ... from 0'; alarm list: memberID:0 alarm:CORRUPT): the peer HashKV answer it reads carries no member id",
    ours: "the alarm names the member whose hash differs (memberID:<victim> alarm:CORRUPT)",
    why: "the alarm is meant to name the corrupted member (corrupt.go's mismatch(id) with the follower's id); writes are refused either way",
  },
  "pre-vote-on-by-default": {
    where: "test/server/flag_defaults.test.ts",
    etcd: "--pre-vote defaults to false: a member that restarts or returns from a partition and misses the leader's heartbeat campaigns at a higher term and deposes a healthy leader",
    ours: "--pre-vote defaults to true (etcd 3.5's default); --pre-vote=false gives 3.4's elections",
    why: "a rejoining member should not cost the cluster its leader (CI of 6def685 saw 3.4 move leadership when a restarted member came back in test/e2e/corruption.test.ts); the flag and ETCD_PRE_VOTE are honoured either way",
  },
  "lease-checkpoint-on-by-default": {
    where: "test/server/flag_defaults.test.ts",
    etcd: "--experimental-enable-lease-checkpoint defaults to false: a lease restarts from its full TTL at every leader change",
    ours: "defaults to true, with --experimental-lease-checkpoint-interval (etcd 3.5's flag, 5m): the new leader keeps what was left (deviation lease-ttl-kept-across-leader-change)",
    why: "issue 15: a lease that outlives leader changes by its full TTL each time may never expire; =false gives 3.4's behaviour",
  },
  "zap-logger-by-default": {
    where: "test/server/flag_defaults.test.ts",
    etcd: "--logger defaults to capnslog (text lines), with a deprecation warning for 3.5",
    ours: "--logger defaults to zap (JSON lines, etcd 3.5's default); --logger=capnslog writes 3.4's text lines with 3.4's deprecation warning",
    why: "structured logs are what log shippers parse and what 3.5 and later write; capnslog is kept for scripts that read 3.4's lines",
  },
  "config-file-unknown-key-refused": {
    where: "test/server/config_file.test.ts",
    etcd: "a config file key its config struct does not name (a typo, client-crl-file, a section's crl-file) is silently ignored, and a discovery or proxy key is acted on",
    ours: "an unknown key is refused naming it; a key that is one of etcetera's flags (client-crl-file, peer-cert-allowed-cn, log-level, ...) is honoured as the flag; a key for an etcd feature etcetera lacks is accepted only at the value that asks for nothing (etcd's sample file lists them all at their defaults) and noted in the log",
    why: "fail closed: a misspelt or unread key would run a different configuration than the operator wrote, and a TLS key silently dropped would serve with less protection than asked for",
  },
  "peer-port-garbage-closed": {
    where: "test/fuzz/ports.test.ts",
    etcd: "keeps or drops garbage peer connections as its HTTP server does; keeps its leader and term (checked)",
    ours: "closes every peer connection that sent something bad (slowloris within the 5 s handshake timeout) and logs it",
    why: "etcetera's transport is its own protocol with its own refusal rules; the shared expectation (no election, members keep serving) is checked on both",
  },
  "downgrade-unimplemented": {
    where: "test/fuzz/grpc_frames.test.ts",
    etcd: "Maintenance.Downgrade: UNIMPLEMENTED (etcd 3.5 API)",
    ours: 'Downgrade is in the API (3.5\'s) and refused with etcd\'s "not capable" error (src/server/api/maintenance.ts)',
    why: "etcetera speaks 3.5's API; 3.4 has no Downgrade at all",
  },
  "incremental-snapshots": {
    where: "test/e2e/snapshot_incremental.test.ts",
    etcd: "a follower the leader's log no longer reaches always gets the whole database (a merged bolt snapshot), whatever it already holds; no snapshot byte counter",
    ours:
      "the leader asks the follower's backend base first and, when it qualifies (leader not compacted past it, HashKV agrees, changes under half the image), sends only the rows since, the other tables whole and the compaction's revision (etcd_network_snapshot_send_total_bytes grows by ~30 KB for a 50 MiB backend); a full image otherwise",
    why: "an improvement over etcd (issue 19: bytes sent proportional to the changed data); the data after a catch-up is asserted the same on both targets, the bytes only on etcetera",
  },
};
