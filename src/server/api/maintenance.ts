/**
 * etcdserverpb.Maintenance: Status, Alarm, Hash, HashKV, Defragment, Snapshot, MoveLeader.
 */
import type { CallContext, MemberHandlers, ServerWritable } from "../../grpc/index.js";
import type { SnapshotResponseInit } from "../../pb/member-types.js";
import { AlarmAction, AlarmType } from "../alarms.js";
import { ETCD_API_VERSION } from "../config.js";
import { Errors } from "../errors.js";
import type { V3Server } from "../v3_server.js";
import { requireAdminUnmapped } from "./authorize.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";

export function maintenanceService(s: V3Server): MemberHandlers<"etcdserverpb.Maintenance"> {
  return {
    Status: (_req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        const st = s.status();
        return {
          header: header(s),
          version: ETCD_API_VERSION,
          dbSize: st.dbSizeBytes,
          leader: st.leader,
          raftIndex: st.raftIndex,
          raftTerm: st.raftTerm,
          raftAppliedIndex: st.raftAppliedIndex,
          errors: st.alarms.map((a) => `memberID:${a.memberID} alarm:${AlarmType[a.alarm]} `),
          dbSizeInUse: st.dbSizeInUseBytes,
          isLearner: st.isLearner,
        };
      }),

    Alarm: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        // etcd 3.4 answers alarms without a header (its applier's AlarmResponse has none).
        if (req.action === AlarmAction.GET) return { alarms: s.listAlarms(req.alarm) };
        const { response } = await s.alarm(req, ctx.signal);
        return { alarms: response.alarms };
      }),

    Hash: (_req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        await requireAdminUnmapped(s, ctx);
        const h = s.hash();
        return { header: header(s, h.revision), hash: h.hash };
      }),

    HashKV: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        await requireAdminUnmapped(s, ctx);
        const h = s.hashKV(req.revision);
        return { header: header(s, h.revision), hash: h.hash, compactRevision: h.compactRevision };
      }),

    Defragment: (_req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        await requireAdminUnmapped(s, ctx);
        await s.defragment();
        // etcd 3.4 answers an empty DefragmentResponse, header included.
        return {};
      }),

    MoveLeader: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (req.targetID === 0n) throw Errors.badLeaderTransferee();
        await s.moveLeader(req.targetID);
        // etcd 3.4 answers an empty MoveLeaderResponse: no header (found by rpc_fields' field comparison).
        return {};
      }),

    Snapshot: (_req, call, ctx) =>
      guarded(() => streamSnapshot(s, call, ctx)),

    Downgrade: () => {
      throw Errors.notCapable();
    },
  };
}

/**
 * Streams the backend in etcd 3.4's format (a bbolt file, read at one consistent point) and then,
 * as etcd does, the SHA-256 of everything sent, so `etcdctl snapshot restore` can tell a complete
 * file from a cut one. A cancelled call stops the stream between chunks.
 */
async function streamSnapshot(s: V3Server, call: ServerWritable<SnapshotResponseInit>, ctx: CallContext): Promise<void> {
  requireLeaderIfAsked(s, ctx);
  await requireAdminUnmapped(s, ctx);
  const hdr = header(s);
  await s.snapshot(async (chunk) => {
    ctx.signal.throwIfAborted(); // the client is gone: stop reading the backend
    if (!call.write({ header: hdr, remainingBytes: chunk.remainingBytes, blob: chunk.blob })) await call.drain();
  });
}
