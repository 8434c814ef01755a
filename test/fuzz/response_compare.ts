/**
 * Field-by-field comparison of two targets' success responses to the same op (issue 16: responses
 * identical to etcd's down to nested fields). Both responses are walked to the leaves — the header,
 * every kv of a range, every response inside a txn and inside the txns nested in it, with their own
 * headers and kvs — and every leaf must be equal, but for the fields listed in EXCLUSIONS, each
 * with the reason it legitimately differs between an etcetera member and a reference etcd that got
 * the same requests in the same order.
 *
 * Ids the two targets chose themselves are not excluded but mapped to the same name first: a
 * server-chosen lease id becomes "@lease:K" (the K-th grant of the run, as rpc_gen's placeholders
 * name it), the member's id "@member", so a kv's lease, a lock's key (name/<lease id in hex>) and a
 * leader key are still compared.
 */
import type { OpOutcome, TargetSession } from "./rpc_runner.js";
import type { RpcOp } from "./rpc_gen.js";

type Obj = Record<string, unknown>;

/** A field left out of the comparison: where (method and path) and why it differs between targets. */
export interface Exclusion {
  /** "service.Method" names, or "*" for every unary method. */
  readonly ops: readonly string[];
  /** The path of the field in the response: dot-separated names, `[]` for any array element. */
  readonly path: RegExp;
  readonly why: string;
}

export const EXCLUSIONS: readonly Exclusion[] = [
  {
    ops: ["*"],
    path: /^header\.(cluster_id|member_id)$/,
    why: "the outer header names each target's own cluster and member: their ids derive from each member's peer URL (a different port), so they differ; rpc_runner's invariants check they are non-zero. Nested headers are compared (both 0)",
  },
  {
    ops: ["cluster.MemberList", "cluster.MemberAdd", "cluster.MemberRemove", "cluster.MemberUpdate", "cluster.MemberPromote"],
    path: /^(members|member)(\[\])?\.(ID|name|peerURLs|clientURLs)(\[\]|\.length)?$/,
    why: "each target's own member: its id, name and URLs (ports) are the test harness's; a MemberUpdate etcd takes and etcetera refuses (a documented deviation) changes etcd's peer URLs",
  },
  {
    ops: ["maintenance.Status"],
    path: /^(version|dbSize|dbSizeInUse|leader|raftIndex|raftAppliedIndex|errors(\[\])?)$/,
    why: "the server's version string, backend file sizes (SQLite vs bbolt pages), the member id as leader, and raft indexes (etcetera's log holds other entries than etcd's: bootstrap conf changes, lease checkpoints) are each implementation's",
  },
  {
    ops: ["maintenance.Hash", "maintenance.HashKV"],
    path: /^hash$/,
    why: "Hash is a CRC of the backend file's bytes (bbolt in etcd, SQLite in etcetera). HashKV is etcd's hash of bbolt's revision keys and marshalled KeyValues (test/e2e/hashkv.test.ts proves it equal on both targets), but the keys this run writes carry leases whose ids each target chose itself, so the same history hashes differently; HashKV's compact_revision and header are compared",
  },
  {
    ops: ["lease.LeaseTimeToLive", "lease.LeaseKeepAlive"],
    path: /^TTL$/,
    why: "the remaining TTL is read from each target's clock at its own moment: the two answers may straddle a second (granted_TTL is compared)",
  },
];

/** Repeated fields etcd fills from a Go map (in no set order): compared as sets. */
export const UNORDERED: readonly Exclusion[] = [
  { ops: ["lease.LeaseLeases"], path: /^leases$/, why: "etcd's lessor lists its lease map" },
  { ops: ["lease.LeaseTimeToLive"], path: /^keys$/, why: "etcd lists the lease's item set (a map)" },
];

/** "service.Method" of a unary op. */
function opName(op: RpcOp & { kind: "unary" }): string {
  return `${op.service}.${op.method}`;
}

function excluded(name: string, path: string): Exclusion | undefined {
  return EXCLUSIONS.find((e) => (e.ops.includes("*") || e.ops.includes(name)) && e.path.test(path));
}

/**
 * The target's own ids mapped to the names the other target's map to (see the file comment).
 * A LeaseLeases answer may list leases no LeaseGrant of the run returned: a Lock or Campaign
 * without a lease grants its session's lease (etcd's concurrency.NewSession, 60 s) even when the
 * call then fails. Both targets grant them in the same order with ids that grow (etcd's idutil
 * counter and etcetera's), so they are named by rank.
 */
function idMap(s: TargetSession, name: string, response: unknown): Map<string, string> {
  const m = new Map<string, string>();
  const learned = sessionLeases(s);
  learned.forEach((id, k) => m.set(id, `@session-lease:${k}`));
  if (name === "lease.LeaseLeases") {
    const known = new Set([...s.leases, ...learned]);
    const unrecorded = (((response as Obj).leases as Obj[]) ?? []).map((l) => String(l.ID)).filter((id) => !known.has(id));
    unrecorded.sort((x, y) => (BigInt(x) < BigInt(y) ? -1 : 1)).forEach((id, i) => m.set(id, `@unrecorded-lease:${i}`));
  }
  s.leases.forEach((id, k) => {
    if (id === "0") return;
    m.set(id, `@lease:${k}`);
  });
  m.set(s.member, "@member");
  // Lock and election keys end in the lease id as %x (etcd's concurrency.Mutex and Election keys).
  for (const [id, named] of [...m]) if (/^-?\d+$/.test(id)) m.set(`/${BigInt.asUintN(64, BigInt(id)).toString(16)}`, `/${named}`);
  return m;
}

/** Session leases a Lock or Campaign without a lease granted, per target, in the order their answers named them. */
const learnedLeases = new WeakMap<TargetSession, string[]>();

function sessionLeases(s: TargetSession): string[] {
  let l = learnedLeases.get(s);
  if (l === undefined) learnedLeases.set(s, (l = []));
  return l;
}

/** Learns the session lease of a successful Lock or Campaign that named none (its key ends in the lease id as %x). */
function learnSessionLease(op: RpcOp & { kind: "unary" }, o: OpOutcome, s: TargetSession): void {
  if (o.code !== 0 || String(op.request.lease ?? "0") !== "0") return;
  const res = o.response as Obj;
  const key = op.service === "lock" ? (res.key as Buffer | undefined) : op.method === "Campaign" ? ((res.leader as Obj | undefined)?.key as Buffer | undefined) : undefined;
  const hex = key?.toString("latin1").split("/").pop();
  if (hex === undefined || !/^[0-9a-f]+$/.test(hex)) return;
  sessionLeases(s).push(BigInt.asIntN(64, BigInt(`0x${hex}`)).toString());
}

/** A leaf as text, with the target's ids renamed. */
function leafText(v: unknown, ids: Map<string, string>): string {
  if (Buffer.isBuffer(v)) {
    const text = v.toString("latin1");
    for (const [id, name] of ids) if (id.startsWith("/") && text.endsWith(id)) return `bytes:${text.slice(0, -id.length)}${name}`;
    return `bytes:${v.toString("hex")}`;
  }
  if (typeof v === "string") return ids.get(v) ?? JSON.stringify(v);
  return JSON.stringify(v);
}

/** Every leaf of `v` under `path`, as path → text (array elements indexed, paths for EXCLUSIONS with `[]`). */
function leaves(
  v: unknown,
  path: string,
  ids: Map<string, string>,
  out: Map<string, { generic: string; text: string }>,
  generic: string,
  unordered: ReadonlySet<string>,
): void {
  if (v !== null && typeof v === "object" && !Buffer.isBuffer(v)) {
    if (Array.isArray(v)) {
      out.set(`${path}.length`, { generic: `${generic}.length`, text: String(v.length) });
      const elements = unordered.has(generic) ? sortedByText(v, ids) : v;
      elements.forEach((x, i) => leaves(x, `${path}[${i}]`, ids, out, `${generic}[]`, unordered));
      return;
    }
    for (const [k, x] of Object.entries(v as Obj)) leaves(x, path === "" ? k : `${path}.${k}`, ids, out, generic === "" ? k : `${generic}.${k}`, unordered);
    return;
  }
  out.set(path, { generic, text: leafText(v, ids) });
}

/** The elements of an unordered repeated field in the order of their text (ids renamed). */
function sortedByText(v: readonly unknown[], ids: Map<string, string>): unknown[] {
  const text = (x: unknown): string => {
    const m = new Map<string, { generic: string; text: string }>();
    leaves(x, "", ids, m, "", new Set());
    return [...m].map(([k, t]) => `${k}=${t.text}`).join(",");
  };
  return v.map((x) => [text(x), x] as const).sort(([p], [q]) => (p < q ? -1 : p > q ? 1 : 0)).map(([, x]) => x);
}

/**
 * The fields in which two success outcomes of the same unary op differ, as "path: ours vs etcd"
 * (empty when they agree everywhere but the EXCLUSIONS). Streams and failures are compared by
 * rpc_runner's outcomeText.
 */
export function responseDifferences(op: RpcOp, ours: OpOutcome, etcd: OpOutcome, oursSession: TargetSession, etcdSession: TargetSession): string[] {
  if (ours.code !== 0 || etcd.code !== 0) return [];
  if (op.kind === "watch") return watchDifferences(ours, etcd, oursSession, etcdSession);
  if (op.kind !== "unary") return [];
  const name = opName(op);
  learnSessionLease(op, ours, oursSession);
  learnSessionLease(op, etcd, etcdSession);
  const a = new Map<string, { generic: string; text: string }>();
  const b = new Map<string, { generic: string; text: string }>();
  const unordered = new Set(UNORDERED.filter((u) => u.ops.includes(name)).map((u) => u.path.source.replace(/^\^|\$$/g, "")));
  leaves(ours.response, "", idMap(oursSession, name, ours.response), a, "", unordered);
  leaves(etcd.response, "", idMap(etcdSession, name, etcd.response), b, "", unordered);
  const out: string[] = [];
  for (const path of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(path);
    const y = b.get(path);
    if (x?.text === y?.text) continue;
    if (excluded(name, (x ?? y)!.generic) !== undefined) continue;
    out.push(`${path}: ${x?.text ?? "(absent)"} vs ${y?.text ?? "(absent)"}`);
  }
  return out;
}

/**
 * A Watch stream's responses, grouped by watch id: the watchers of one stream interleave in no set
 * order, but each watcher's own responses (created, its events with their kvs and prev_kvs,
 * fragments, compaction and cancel answers) come in one order on both targets, since no write runs
 * while the stream is read. Only the outer headers' cluster and member ids are left out (EXCLUSIONS).
 */
function watchDifferences(ours: OpOutcome, etcd: OpOutcome, oursSession: TargetSession, etcdSession: TargetSession): string[] {
  const byId = (o: OpOutcome): Obj => {
    const groups: Record<string, Obj[]> = {};
    for (const r of (o.response as Obj[]) ?? []) (groups[String(r.watch_id)] ??= []).push(r);
    return groups;
  };
  const a = new Map<string, { generic: string; text: string }>();
  const b = new Map<string, { generic: string; text: string }>();
  leaves(byId(ours), "", idMap(oursSession, "watch", undefined), a, "", new Set());
  leaves(byId(etcd), "", idMap(etcdSession, "watch", undefined), b, "", new Set());
  const out: string[] = [];
  for (const path of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(path);
    const y = b.get(path);
    if (x?.text === y?.text) continue;
    // "<id>[i].header.cluster_id": the outer header of each response.
    if (/^[^.]+\[\]\.header\.(cluster_id|member_id)$/.test((x ?? y)!.generic)) continue;
    out.push(`watch ${path}: ${x?.text ?? "(absent)"} vs ${y?.text ?? "(absent)"}`);
  }
  return out;
}
