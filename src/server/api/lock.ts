/**
 * v3lockpb.Lock (etcd's v3lock server): a distributed mutex built, like etcd's
 * clientv3/concurrency.Mutex, from a key per waiter under `name/`, leases and revisions.
 *
 * Lock(name, lease) creates `name/<lease hex>` with that lease (or finds it, when the same lease
 * already waits or holds), then waits until every key under the prefix created before it is
 * deleted — watching only the nearest predecessor each round, never polling. Unlock deletes the
 * key. Everything runs on this member: writes through Raft, reads after a ReadIndex round, waits on
 * watchers of the local watchable store.
 *
 * The session helpers below (`Session`) are shared with the election service.
 */
import type { MemberHandlers } from "../../grpc/index.js";
import { GrpcError, Status } from "../../grpc/index.js";
import {
  CompareResult,
  CompareTarget,
  EventType,
  SortOrder,
  SortTarget,
  type Event,
  type KeyValue,
  type RangeRequest,
  type TxnRequest,
  type TxnResponse,
} from "../../mvcc/types.js";
import type { V3Server } from "../v3_server.js";
import { Errors, toEtcdError } from "../errors.js";
import { authorized } from "./authorize.js";
import { requireLeaderIfAsked } from "./guard.js";
import { header, type ResponseHeader } from "./header.js";
import type { LeaseId } from "../../lease/types.js";

/** concurrency.defaultSessionTTL: the lease granted when a request names none. */
const DEFAULT_SESSION_TTL_SEC = 60;
/** concurrency.ErrSessionExpired: the waiter's own key vanished (its lease expired) while it waited. */
export const sessionExpired = () => new GrpcError(Status.UNKNOWN, "session expired");

/**
 * etcd runs these services through an in-process client whose errors lose their gRPC code on the
 * way back: callers see code Unknown with etcd's message (e.g. a missing lease is not NotFound
 * here). The `hasleader` check happens before, in etcd's interceptor, and keeps its code.
 */
export async function viaClient<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    const g = toEtcdError(e);
    throw g.code === Status.UNKNOWN ? g : new GrpcError(Status.UNKNOWN, g.message);
  }
}

export function lockService(s: V3Server): MemberHandlers<"v3lockpb.Lock"> {
  return {
    Lock: (req, ctx) => {
      requireLeaderIfAsked(s, ctx);
      return viaClient(async () => {
        const session = new Session(await authorized(s, ctx), ctx.signal);
        const lease = await session.lease(req.lease ?? 0);
        const m = await lock(session, Buffer.from(req.name ?? new Uint8Array(0)), lease);
        return { header: m.header, key: m.key };
      });
    },

    Unlock: (req, ctx) => {
      requireLeaderIfAsked(s, ctx);
      return viaClient(async () => {
        const session = new Session(await authorized(s, ctx), ctx.signal);
        return { header: await session.del(Buffer.from(req.key ?? new Uint8Array(0))) };
      });
    },
  };
}

/** etcd's Mutex.Lock: returns the holder's key and the header of the read that proved it holds. */
async function lock(session: Session, name: Buffer, lease: LeaseId): Promise<{ key: Buffer; header: ResponseHeader }> {
  const pfx = Buffer.concat([name, SLASH]);
  const key = Buffer.concat([pfx, Buffer.from(lease.toString(16))]);
  const { response, header: hdr } = await session.txn({
    compare: [{ key, target: CompareTarget.CREATE, result: CompareResult.EQUAL, createRevision: 0 }],
    success: [{ requestPut: { key, value: EMPTY, lease } }, { requestRange: firstCreate(pfx) }],
    // The same lease already waits or holds: reuse its key.
    failure: [{ requestRange: { key } }, { requestRange: firstCreate(pfx) }],
  });
  const myRev = response.succeeded ? hdr.revision : rangeKvs(response, 0)[0]!.createRevision;
  const owner = rangeKvs(response, 1)[0];
  if (owner === undefined || owner.createRevision === myRev) return { key, header: hdr };
  try {
    await session.waitDeletes(pfx, myRev - 1);
  } catch (e) {
    // etcd releases the waiter's key when the wait fails (e.g. the client went away).
    await session.delDetached(key).catch(() => undefined);
    throw e;
  }
  // The waiter's lease may have expired while it waited: then its key is gone and it holds nothing.
  let mine: { kvs: KeyValue[]; header: ResponseHeader };
  try {
    mine = await session.get({ key });
  } catch (e) {
    await session.delDetached(key).catch(() => undefined);
    throw e;
  }
  if (mine.kvs.length === 0) throw sessionExpired();
  return { key, header: mine.header };
}

const SLASH = Buffer.from("/");
const EMPTY = Buffer.alloc(0);

/** The key range of every key starting with `pfx` (clientv3.WithPrefix). */
export function prefixRange(pfx: Buffer): { key: Buffer; rangeEnd: Buffer } {
  const end = Buffer.from(pfx);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]! += 1;
      return { key: pfx, rangeEnd: end.subarray(0, i + 1) };
    }
  }
  return { key: pfx, rangeEnd: Buffer.from([0]) };
}

/** clientv3.WithFirstCreate on a prefix: the key created first. */
export function firstCreate(pfx: Buffer): RangeRequest {
  return { ...prefixRange(pfx), sortTarget: SortTarget.CREATE, sortOrder: SortOrder.ASCEND, limit: 1 };
}

function rangeKvs(r: TxnResponse, i: number): KeyValue[] {
  return r.responses[i]?.responseRange?.kvs ?? [];
}

/**
 * What etcd's concurrency package does through its in-process client, done on the member: writes
 * proposed through Raft, linearizable reads, and waits on watchers of the local store. `signal`
 * is the calling RPC's: its end aborts any wait.
 */
export class Session {
  constructor(
    private readonly s: V3Server,
    readonly signal: AbortSignal,
  ) {}

  /** concurrency.NewSession: the given lease, or a fresh one with etcd's default session TTL. */
  async lease(id: LeaseId): Promise<LeaseId> {
    if (id !== 0) return id;
    const { response } = await this.s.leaseGrant({ ID: 0, TTL: DEFAULT_SESSION_TTL_SEC }, this.signal);
    return response.ID;
  }

  async txn(req: TxnRequest, signal: AbortSignal | undefined = this.signal): Promise<{ response: TxnResponse; header: ResponseHeader }> {
    const { response, revision } = await this.s.txn(req, signal);
    return { response, header: header(this.s, revision) };
  }

  /** A txn that outlives the calling RPC (cleanup after the client went away). */
  txnDetached(req: TxnRequest): Promise<{ response: TxnResponse; header: ResponseHeader }> {
    return this.txn(req, undefined);
  }

  /** A response header at `revision` from this member. */
  header(revision: number): ResponseHeader {
    return header(this.s, revision);
  }

  /** A linearizable Range. */
  async get(req: RangeRequest): Promise<{ kvs: KeyValue[]; header: ResponseHeader }> {
    const r = await this.s.range(req, this.signal);
    this.signal.throwIfAborted();
    return { kvs: r.kvs, header: header(this.s, r.revision) };
  }

  async del(key: Buffer, signal: AbortSignal | undefined = this.signal): Promise<ResponseHeader> {
    const { revision } = await this.s.deleteRange({ key }, signal);
    return header(this.s, revision);
  }

  /** A delete that outlives the calling RPC (etcd uses the client's own context for cleanup). */
  delDetached(key: Buffer): Promise<ResponseHeader> {
    return this.del(key, undefined);
  }

  /**
   * concurrency.waitDeletes: waits until no key under `pfx` created at or before `maxCreateRev`
   * is left, watching the newest such key each round.
   */
  async waitDeletes(pfx: Buffer, maxCreateRev: number): Promise<ResponseHeader> {
    for (;;) {
      const r = await this.get({ ...prefixRange(pfx), sortTarget: SortTarget.CREATE, sortOrder: SortOrder.DESCEND, limit: 1, maxCreateRevision: maxCreateRev });
      const last = r.kvs[0];
      if (last === undefined) return r.header;
      await this.waitDelete(Buffer.from(last.key), r.header.revision);
    }
  }

  /** Resolves at the first delete of `key` from revision `rev` on. */
  waitDelete(key: Buffer, rev: number): Promise<void> {
    return this.watch({ key, startRevision: rev }, (events) => events.some((e) => e.type === EventType.DELETE));
  }

  /**
   * Watches from `startRevision` until `done(events, revision)` returns true for a response (the
   * next response is taken only after `done` settles, so a slow consumer parks the watcher in the
   * store rather than buffering). Throws etcd's
   * compacted error if history is gone, "server stopped" if the store closes, and the abort
   * reason if the RPC ends first.
   */
  async watch(
    req: { key: Buffer; rangeEnd?: Buffer; startRevision: number },
    done: (events: Event[], revision: number) => boolean | Promise<boolean>,
  ): Promise<void> {
    this.signal.throwIfAborted();
    const ws = this.s.watchStream();
    const onAbort = () => this.s.closeWatchStream(ws);
    this.signal.addEventListener("abort", onAbort, { once: true });
    try {
      ws.watch(req);
      for (;;) {
        const r = await ws.next();
        if (r === null) {
          this.signal.throwIfAborted();
          throw Errors.stopped();
        }
        if (r.canceled) throw Errors.compacted();
        if (await done(r.events, r.revision)) return;
      }
    } finally {
      this.signal.removeEventListener("abort", onAbort);
      this.s.closeWatchStream(ws);
    }
  }
}
