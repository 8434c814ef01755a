/**
 * Runs generated RpcOps on one target through @grpc/grpc-js clients of etcd's API and checks the
 * invariants every success response must satisfy. The outcome of an op is what two targets are
 * compared on: the status code and message, and for streams a normalised summary.
 */
import * as grpc from "@grpc/grpc-js";
import { clients, serviceCtor } from "../e2e/grpc_client.js";
import { type RpcOp, resolvePlaceholders, type ServiceKey } from "./rpc_gen.js";

/** The deadline of a unary call (a hang past it is a finding). */
export const UNARY_DEADLINE_MS = 8_000;
/** How long a stream op reads before it cancels its call. */
const STREAM_READ_MS = 600;

export interface OpOutcome {
  /** gRPC status code (0 on success). */
  readonly code: number;
  readonly message: string;
  /** The response of a successful unary call, or a stream's responses. */
  readonly response?: unknown;
  /** A normalised, target-independent summary of a stream's responses (compared between targets). */
  readonly summary?: string;
}

type Obj = Record<string, unknown>;
type UnaryFn = (req: unknown, md: unknown, opts: unknown, cb: (err: grpc.ServiceError | null, res: Obj) => void) => void;
type StreamCall = grpc.ClientDuplexStream<unknown, Obj>;

export class TargetSession {
  private readonly c: ReturnType<typeof clients>;
  private readonly lock: grpc.Client;
  private readonly election: grpc.Client;
  /** Lease ids granted so far, by grant index ("0" when the grant failed). */
  readonly leases: string[] = [];
  member = "0";
  /** The highest header revision seen: revisions never go back on one member. */
  maxRevision = 0;

  constructor(readonly endpoint: string) {
    this.c = clients(endpoint);
    const opts = { "grpc.max_send_message_length": 64 * 1024 * 1024, "grpc.max_receive_message_length": 64 * 1024 * 1024 };
    const insecure = grpc.credentials.createInsecure();
    this.lock = new (serviceCtor("v3lockpb.Lock"))(endpoint, insecure, opts);
    this.election = new (serviceCtor("v3electionpb.Election"))(endpoint, insecure, opts);
  }

  async init(): Promise<void> {
    const res = await this.unary("cluster", "MemberList", {});
    if (res.code !== 0) throw new Error(`MemberList on ${this.endpoint}: ${res.message}`);
    const header = (res.response as Obj).header as Obj;
    this.member = String(header.member_id);
  }

  close(): void {
    this.c.close();
    this.lock.close();
    this.election.close();
  }

  private client(service: ServiceKey): grpc.Client {
    if (service === "lock") return this.lock;
    if (service === "election") return this.election;
    return this.c[service];
  }

  unary(service: ServiceKey, method: string, request: Obj, deadlineMs = UNARY_DEADLINE_MS): Promise<OpOutcome> {
    const client = this.client(service);
    const fn = (client as unknown as Record<string, UnaryFn>)[method]!.bind(client);
    const req = resolvePlaceholders(request, { leases: this.leases, member: this.member });
    return new Promise((resolve) => {
      fn(req, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (err, res) => {
        if (err) resolve({ code: err.code, message: err.details });
        else resolve({ code: 0, message: "", response: res });
      });
    });
  }

  /** Runs one op; never rejects. */
  async run(op: RpcOp): Promise<OpOutcome> {
    switch (op.kind) {
      case "unary": {
        const out = await this.unary(op.service, op.method, op.request);
        if (op.method === "LeaseGrant") this.leases.push(out.code === 0 ? String((out.response as Obj).ID) : "0");
        return out;
      }
      case "watch":
        return this.stream(this.c.watch, "Watch", op.requests, summariseWatch);
      case "keepalive":
        return this.stream(
          this.c.lease,
          "LeaseKeepAlive",
          op.ids.map((ID) => ({ ID })),
          (rs) => rs.map((r) => (Number(r.TTL) > 0 ? "alive" : "gone")).join(","),
        );
      case "observe":
        return this.observe(op.name);
    }
  }

  private stream(client: grpc.Client, method: string, requests: readonly Obj[], summarise: (rs: Obj[]) => string): Promise<OpOutcome> {
    const ids = { leases: this.leases, member: this.member };
    const call = (client as unknown as Record<string, (md: unknown, o: unknown) => StreamCall>)[method]!.call(client, new grpc.Metadata(), {
      deadline: Date.now() + UNARY_DEADLINE_MS,
    });
    for (const r of requests) call.write(resolvePlaceholders(r, ids));
    // A cancel of our own (CANCELLED) ends a bidi stream as an OK read: both etcd and etcetera
    // keep a half-closed watch open.
    return readFor(call, summarise, (e) => (e.code === 1 ? [0, ""] : [e.code, e.details]));
  }

  private observe(name: Buffer): Promise<OpOutcome> {
    const call = (this.election as unknown as Record<string, (req: unknown, md: unknown, o: unknown) => grpc.ClientReadableStream<Obj>>).Observe!.call(
      this.election,
      { name },
      new grpc.Metadata(),
      { deadline: Date.now() + UNARY_DEADLINE_MS },
    );
    return readFor(call, (rs) => (rs.length > 0 ? "leader" : "none"), (e) => [e.code, e.details]);
  }
}

/** Collects a stream's responses for STREAM_READ_MS (then cancels it), or until it ends. */
function readFor(
  call: grpc.ClientReadableStream<Obj> | StreamCall,
  summarise: (rs: Obj[]) => string,
  onError: (e: grpc.ServiceError) => [number, string],
): Promise<OpOutcome> {
  const responses: Obj[] = [];
  return new Promise((resolve) => {
    let done = false;
    const finish = (code: number, message: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ code, message, response: responses, summary: summarise(responses) });
    };
    call.on("data", (r: Obj) => responses.push(r));
    call.on("error", (e: grpc.ServiceError) => finish(...onError(e)));
    call.on("status", (st: grpc.StatusObject) => finish(st.code, st.details));
    const timer = setTimeout(() => {
      call.cancel();
      finish(0, "");
    }, STREAM_READ_MS);
  });
}

// ---- invariants of success responses ----

function num(v: unknown): number {
  return Number(v ?? 0);
}

/** Byte-wise comparison, as etcd orders keys. */
function cmpBytes(a: Buffer, b: Buffer): number {
  return Buffer.compare(a, b);
}

/**
 * Every response has a header naming cluster and member; unary responses' revisions never go back
 * on one member (a watch response's header carries its events' revision, which may be older).
 */
function checkHeader(res: Obj, s: TargetSession, where: string, out: string[], monotonic = true): void {
  const h = res.header as Obj | undefined;
  if (h === undefined || h === null) {
    out.push(`${where}: no header`);
    return;
  }
  if (!(num(h.cluster_id) !== 0 && num(h.member_id) !== 0)) out.push(`${where}: header without cluster/member id: ${JSON.stringify(h)}`);
  if (!monotonic) return;
  const rev = num(h.revision);
  if (rev < s.maxRevision) out.push(`${where}: header revision ${rev} went back from ${s.maxRevision}`);
  s.maxRevision = Math.max(s.maxRevision, rev);
}

function checkRange(req: Obj, res: Obj, where: string, out: string[]): void {
  const kvs = (res.kvs as Obj[]) ?? [];
  const count = num(res.count);
  const limit = num(req.limit);
  if (count < kvs.length) out.push(`${where}: count ${count} < ${kvs.length} kvs`);
  if (res.more === true && !(limit > 0 && kvs.length === limit)) out.push(`${where}: more=true but ${kvs.length} kvs for limit ${limit}`);
  if (limit > 0 && kvs.length > limit) out.push(`${where}: ${kvs.length} kvs over limit ${limit}`);
  if (req.count_only === true && kvs.length > 0) out.push(`${where}: count_only returned ${kvs.length} kvs`);
  const headerRev = num((res.header as Obj | undefined)?.revision);
  for (const kv of kvs) {
    if (req.keys_only === true && (kv.value as Buffer).length > 0) out.push(`${where}: keys_only returned a value`);
    if (num(kv.mod_revision) > headerRev || num(kv.create_revision) > num(kv.mod_revision) || num(kv.version) < 1) {
      out.push(`${where}: impossible kv revisions ${JSON.stringify({ create: kv.create_revision, mod: kv.mod_revision, version: kv.version, header: headerRev })}`);
    }
  }
  // Sorted by key, ascending: no order or ASCEND with target KEY (etcd sorts NONE with another
  // target ascending by that target).
  if ((num(req.sort_order) === 0 || num(req.sort_order) === 1) && num(req.sort_target) === 0) {
    for (let i = 1; i < kvs.length; i++) {
      if (cmpBytes(kvs[i - 1]!.key as Buffer, kvs[i]!.key as Buffer) >= 0) out.push(`${where}: keys not ascending`);
    }
  }
}

/** The invariant violations of one op's success outcome (empty when none). */
export function invariantViolations(op: RpcOp, o: OpOutcome, s: TargetSession): string[] {
  const out: string[] = [];
  if (o.code !== 0) return out;
  if (op.kind === "watch") {
    const seen = new Map<string, number>();
    for (const r of (o.response as Obj[]) ?? []) {
      checkHeader(r, s, "Watch", out, false);
      const id = String(r.watch_id);
      for (const ev of (r.events as Obj[]) ?? []) {
        const rev = num((ev.kv as Obj).mod_revision);
        if (rev < (seen.get(id) ?? 0)) out.push(`Watch ${id}: event revision ${rev} after ${seen.get(id)}`);
        seen.set(id, rev);
      }
    }
    return out;
  }
  if (op.kind !== "unary") return out;
  const res = o.response as Obj;
  const where = `${op.service}.${op.method}`;
  // etcd 3.4 leaves the revision 0 in Cluster responses' headers and sends no header with an empty
  // Alarm answer nor with MoveLeader's: revisions are checked on KV and Lease responses, headers
  // wherever etcd sends them.
  const monotonic = op.service === "kv" || op.service === "lease";
  const headerOptional = op.service === "lock" || op.service === "election" || op.method === "Alarm" || op.method === "MoveLeader";
  if (!headerOptional || (res.header !== undefined && res.header !== null)) checkHeader(res, s, where, out, monotonic);
  if (op.method === "Range") checkRange(op.request, res, where, out);
  if (op.method === "Put" && op.request.prev_kv !== true && res.prev_kv !== null && res.prev_kv !== undefined) out.push(`${where}: prev_kv without asking`);
  if (op.method === "DeleteRange" && num(res.deleted) < ((res.prev_kvs as Obj[]) ?? []).length) out.push(`${where}: deleted < prev_kvs`);
  if (op.method === "Txn") {
    const branch = (res.succeeded === true ? op.request.success : op.request.failure) as Obj[];
    if (((res.responses as Obj[]) ?? []).length !== branch.length) out.push(`${where}: ${((res.responses as Obj[]) ?? []).length} responses for ${branch.length} ops`);
  }
  if (op.method === "LeaseGrant" && (num(res.ID) === 0 || num(res.TTL) <= 0)) out.push(`${where}: granted ${JSON.stringify({ ID: res.ID, TTL: res.TTL })}`);
  return out;
}

/** Watch responses, normalised: per response its kind and cancel reason (ids and revisions differ by target). */
function summariseWatch(rs: Obj[]): string {
  return rs
    .map((r) => {
      if (r.created === true) return r.canceled === true ? `created+canceled(${String(r.cancel_reason)})` : "created";
      if (r.canceled === true) return `canceled(${String(r.cancel_reason)}${num(r.compact_revision) > 0 ? ",compacted" : ""})`;
      return ((r.events as Obj[]) ?? []).length > 0 ? "events" : "progress";
    })
    .filter((k) => k !== "events" && k !== "progress")
    .sort()
    .join(",");
}

/**
 * An outcome as compared between targets: code, message, stream summary. Sizes in "larger than
 * max (N vs. M)" are dropped: a request naming a lease carries that target's lease id, whose varint
 * length differs between targets.
 */
export function outcomeText(o: OpOutcome): string {
  const message = o.message.replace(/\(\d+ vs\. (\d+)\)/, "(N vs. $1)");
  // A stream the server ended with an error status (e.g. an oversized message on a watch stream)
  // races the responses already in flight: how many arrive first depends on timing on both
  // servers, so only the status is compared.
  if (o.code !== 0) return `${o.code} ${message}`;
  return o.summary !== undefined ? `${o.code} ${message} [${o.summary}]` : `${o.code} ${message}`;
}
