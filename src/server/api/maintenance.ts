/**
 * etcdserverpb.Maintenance: Status, Alarm, Hash, HashKV, Defragment, Snapshot, MoveLeader.
 */
import { createHash } from "node:crypto";
import { open } from "node:fs/promises";
import type { CallContext, MemberHandlers, ServerWritable } from "../../grpc/index.js";
import type { SnapshotResponseInit } from "../../pb/member-types.js";
import { AlarmAction, AlarmType } from "../alarms.js";
import { ETCD_API_VERSION } from "../config.js";
import { Errors } from "../errors.js";
import type { V3Server } from "../v3_server.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";

/** etcd sends the snapshot in 32 KiB blobs (snapshotSendBufferSize). */
const SNAPSHOT_CHUNK_BYTES = 32 * 1024;

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
          dbSizeInUse: st.dbSizeBytes,
          isLearner: st.isLearner,
        };
      }),

    Alarm: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (req.action === AlarmAction.GET) {
          return { header: header(s), alarms: s.listAlarms(req.alarm) };
        }
        const { response, revision } = await s.alarm(req, ctx.signal);
        return { header: header(s, revision), alarms: response.alarms };
      }),

    Hash: (_req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        const h = s.hash();
        return { header: header(s, h.revision), hash: h.hash };
      }),

    HashKV: (req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        const h = s.hashKV(req.revision);
        return { header: header(s, h.revision), hash: h.hash, compactRevision: h.compactRevision };
      }),

    Defragment: (_req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        s.defragment();
        return { header: header(s) };
      }),

    MoveLeader: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (req.targetID === 0) throw Errors.badLeaderTransferee();
        await s.moveLeader(req.targetID);
        return { header: header(s) };
      }),

    Snapshot: (_req, call, ctx) =>
      guarded(() => streamSnapshot(s, call, ctx)),

    Downgrade: () => {
      throw Errors.notCapable();
    },
  };
}

/**
 * Streams a consistent copy of the backend, then (as etcd does) the sha256 of everything sent, so
 * `etcdctl snapshot restore` can tell a complete file from a cut one.
 */
async function streamSnapshot(s: V3Server, call: ServerWritable<SnapshotResponseInit>, ctx: CallContext): Promise<void> {
  requireLeaderIfAsked(s, ctx);
  await s.snapshot(async (image) => {
    const fh = await open(image, "r");
    try {
      const { size } = await fh.stat();
      const sha = createHash("sha256");
      const hdr = header(s);
      let sent = 0;
      const buf = Buffer.alloc(SNAPSHOT_CHUNK_BYTES);
      while (sent < size) {
        if (ctx.cancelled) return;
        const { bytesRead } = await fh.read(buf, 0, Math.min(buf.length, size - sent), sent);
        if (bytesRead === 0) throw new Error("snapshot file shrank while streaming");
        const blob = Buffer.from(buf.subarray(0, bytesRead));
        sha.update(blob);
        sent += bytesRead;
        if (!call.write({ header: hdr, remainingBytes: size - sent + 32, blob })) await call.drain();
      }
      call.write({ header: hdr, remainingBytes: 0, blob: sha.digest() });
    } finally {
      await fh.close();
    }
  });
}
