/**
 * v3electionpb.Election (etcd's v3election server over clientv3/concurrency.Election): candidates
 * are keys `name/<lease hex>` bound to their leases; the leader is the key created first. A
 * campaign waits (watching its predecessors) until every earlier key is gone; proclaim rewrites
 * the leader's value if it still holds its key at the same create revision; resign deletes it;
 * observe streams the current leader and every change.
 */
import type { MemberHandlers, ServerWritable } from "../../grpc/index.js";
import type { KeyValue, LeaderKey, LeaderResponseInit, ResponseHeader } from "../../pb/member-types.js";
import { GrpcError, Status } from "../../grpc/index.js";
import { CompareResult, CompareTarget, EventType } from "../../mvcc/types.js";
import type { V3Server } from "../v3_server.js";
import { Errors, toEtcdError } from "../errors.js";
import { authorized } from "./authorize.js";
import { REQUIRE_LEADER_KEY, requireLeaderIfAsked } from "./guard.js";
import { firstCreate, prefixRange, Session, viaClient } from "./lock.js";
import { LeaderLossMonitor } from "./watch.js";
import type { LeaseId } from "../../lease/types.js";

/** etcd's errors here are plain Go errors: gRPC answers them with code Unknown and their text. */
const errElectionNotLeader = () => new GrpcError(Status.UNKNOWN, "election: not leader");
const errElectionNoLeader = () => new GrpcError(Status.UNKNOWN, "election: no leader");
const errMissingLeaderKey = () => new GrpcError(Status.UNKNOWN, '"leader" field must be provided');

const SLASH = Buffer.from("/");

function prefixOf(name: Uint8Array | undefined): Buffer {
  return Buffer.concat([Buffer.from(name ?? new Uint8Array(0)), SLASH]);
}

function bytes(b: Uint8Array | undefined): Buffer {
  return Buffer.from(b ?? new Uint8Array(0));
}

export function electionService(s: V3Server): MemberHandlers<"v3electionpb.Election"> {
  const monitor = new LeaderLossMonitor(s);
  return {
    Campaign: (req, ctx) => {
      requireLeaderIfAsked(s, ctx);
      return viaClient(async () => {
        const session = new Session(await authorized(s, ctx), ctx.signal);
        const lease = await session.lease(req.lease ?? 0);
        return campaign(session, bytes(req.name), lease, bytes(req.value));
      });
    },

    Proclaim: (req, ctx) => {
      requireLeaderIfAsked(s, ctx);
      return viaClient(async () => {
        if (req.leader == null) throw errMissingLeaderKey();
        const session = new Session(await authorized(s, ctx), ctx.signal);
        // etcd opens a session on the leader's lease first (granting one when it is 0).
        const lease = await session.lease(req.leader.lease ?? 0);
        return { header: await proclaim(session, req.leader, lease, bytes(req.value)) };
      });
    },

    Leader: (req, ctx) => {
      requireLeaderIfAsked(s, ctx);
      return viaClient(async () => {
        const r = await new Session(await authorized(s, ctx), ctx.signal).get(firstCreate(prefixOf(req.name)));
        if (r.kvs.length === 0) throw errElectionNoLeader();
        return { header: r.header, kv: r.kvs[0] };
      });
    },

    Observe: (req, call, ctx) => {
      requireLeaderIfAsked(s, ctx);
      // The observation stops when the RPC ends or when a `hasleader` client's member loses its leader.
      const stop = new AbortController();
      const abort = () => stop.abort(ctx.signal.reason);
      if (ctx.signal.aborted) abort();
      else ctx.signal.addEventListener("abort", abort, { once: true });
      const bound = {
        loseLeader: () => {
          call.fail(Errors.noLeader());
          stop.abort(Errors.noLeader());
        },
      };
      if (ctx.metadata.get(REQUIRE_LEADER_KEY) === "true") monitor.add(bound);
      return authorized(s, ctx)
        .catch((e: unknown) => {
          throw toEtcdError(e);
        })
        .then((as) =>
          observe(new Session(as, stop.signal), prefixOf(req.name), call).catch((e: unknown) => {
            // etcd ends an observation whose reads or watches fail with OK; only cancellation is an error.
            if (stop.signal.aborted) throw e;
          }),
        )
        .finally(() => {
          monitor.delete(bound);
          ctx.signal.removeEventListener("abort", abort);
        });
    },

    Resign: (req, ctx) => {
      requireLeaderIfAsked(s, ctx);
      return viaClient(async () => {
        if (req.leader == null) throw errMissingLeaderKey();
        const session = new Session(await authorized(s, ctx), ctx.signal);
        await session.lease(req.leader.lease ?? 0);
        return { header: await resign(session, bytes(req.leader.key), req.leader.rev ?? 0) };
      });
    },
  };
}

/** concurrency.Election.Campaign, answered with the campaign txn's header as etcd does. */
async function campaign(session: Session, name: Buffer, lease: LeaseId, value: Buffer) {
  const pfx = Buffer.concat([name, SLASH]);
  const key = Buffer.concat([pfx, Buffer.from(lease.toString(16))]);
  const { response, header: hdr } = await session.txn({
    compare: [{ key, target: CompareTarget.CREATE, result: CompareResult.EQUAL, createRevision: 0 }],
    success: [{ requestPut: { key, value, lease } }],
    failure: [{ requestRange: { key } }],
  });
  let rev = hdr.revision;
  const leader = { name, key, rev, lease };
  if (!response.succeeded) {
    // This lease already campaigns: keep its place, update the value if it differs.
    const kv = response.responses[0]!.responseRange!.kvs[0]!;
    rev = leader.rev = kv.createRevision;
    if (!Buffer.from(kv.value).equals(value)) {
      try {
        await proclaim(session, leader, lease, value);
      } catch (e) {
        await resign(session, key, rev, true).catch(() => undefined);
        throw e;
      }
    }
  }
  try {
    await session.waitDeletes(pfx, rev - 1);
  } catch (e) {
    // A campaign abandoned by its client withdraws the candidate (etcd resigns on context cancel).
    if (session.signal.aborted) await resign(session, key, rev, true).catch(() => undefined);
    throw e;
  }
  return { header: hdr, leader };
}

/** Sets the leader's value if it still holds `key` created at `rev`; else "election: not leader". */
async function proclaim(session: Session, leader: LeaderKey, lease: LeaseId, value: Buffer): Promise<ResponseHeader> {
  const key = bytes(leader.key);
  const { response, header: hdr } = await session.txn({
    compare: [{ key, target: CompareTarget.CREATE, result: CompareResult.EQUAL, createRevision: leader.rev ?? 0 }],
    success: [{ requestPut: { key, value, lease } }],
  });
  if (!response.succeeded) throw errElectionNotLeader();
  return hdr;
}

/** Deletes `key` if it is still the one created at `rev`; answers OK either way, as etcd does. */
async function resign(session: Session, key: Buffer, rev: number, detached = false): Promise<ResponseHeader> {
  const req = {
    compare: [{ key, target: CompareTarget.CREATE, result: CompareResult.EQUAL, createRevision: rev }],
    success: [{ requestDeleteRange: { key } }],
  };
  return (detached ? await session.txnDetached(req) : await session.txn(req)).header;
}

/**
 * concurrency.Election.Observe: sends the current leader (waiting for the first candidate if there
 * is none), then every new value of that leader's key until it is deleted, then the next leader.
 */
async function observe(session: Session, pfx: Buffer, call: ServerWritable<LeaderResponseInit>): Promise<void> {
  const send = async (r: LeaderResponseInit) => {
    if (!call.write(r)) await call.drain();
    session.signal.throwIfAborted();
  };
  for (;;) {
    const r = await session.get(firstCreate(pfx));
    let current: { header: ResponseHeader; kv: KeyValue } | undefined = r.kvs[0] === undefined ? undefined : { header: r.header, kv: r.kvs[0] };
    if (current === undefined) {
      // No leader: the first put under the prefix makes one.
      await session.watch({ ...prefixRange(pfx), startRevision: r.header.revision }, (events) => {
        const put = events.find((e) => e.type === EventType.PUT);
        if (put === undefined) return false;
        current = { header: session.header(put.kv.modRevision), kv: put.kv };
        return true;
      });
    }
    const first = current!;
    await send(first);
    await session.watch({ key: Buffer.from(first.kv.key), startRevision: first.header.revision + 1 }, async (events, revision) => {
      for (const e of events) {
        if (e.type === EventType.DELETE) return true;
        await send({ header: session.header(revision), kv: e.kv });
      }
      return false;
    });
  }
}
