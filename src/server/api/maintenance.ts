/**
 * etcdserverpb.Maintenance: Status, Alarm, Hash, HashKV, Defragment, Snapshot, MoveLeader.
 */
import { createHash } from "node:crypto";
import { open, rm } from "node:fs/promises";
import { join } from "node:path";
import type { CallContext, MemberHandlers, ServerWritable } from "../../grpc/index.js";
import type { SnapshotResponseInit } from "../../pb/member-types.js";
import { AlarmAction, AlarmType, type AlarmMember } from "../alarms.js";
import { ETCD_API_VERSION } from "../config.js";
import type { EtcdServer } from "../etcdserver.js";
import { Errors } from "../errors.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";

/** etcd sends the snapshot in 32 KiB blobs (snapshotSendBufferSize). */
const SNAPSHOT_CHUNK_BYTES = 32 * 1024;

export function maintenanceService(s: EtcdServer): MemberHandlers<"etcdserverpb.Maintenance"> {
  return {
    Status: (_req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        const dbSize = s.kv.sizeBytes();
        return {
          header: header(s),
          version: ETCD_API_VERSION,
          dbSize,
          leader: s.leader(),
          raftIndex: s.raftIndex(),
          raftTerm: s.raftTerm(),
          raftAppliedIndex: s.raftAppliedIndex(),
          errors: s.alarms.list().map((a) => `memberID:${a.memberID} alarm:${AlarmType[a.alarm]} `),
          dbSizeInUse: dbSize,
          isLearner: s.isLearner(),
        };
      }),

    Alarm: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        if (req.action === AlarmAction.GET) {
          return { header: header(s), alarms: s.alarms.list(req.alarm) };
        }
        const { response, revision } = await s.proposeAndApply<{ alarms: AlarmMember[] }>({ alarm: req }, ctx.signal);
        return { header: header(s, revision), alarms: response.alarms };
      }),

    Hash: (_req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        const h = s.kv.hash();
        return { header: header(s, h.revision), hash: h.hash };
      }),

    HashKV: (req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        const h = s.kv.hashKV(req.revision);
        return { header: header(s, h.revision), hash: h.hash, compactRevision: h.compactRevision };
      }),

    Defragment: (_req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        s.kv.defragment();
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
async function streamSnapshot(s: EtcdServer, call: ServerWritable<SnapshotResponseInit>, ctx: CallContext): Promise<void> {
  requireLeaderIfAsked(s, ctx);
  const tmp = join(s.config.snapDir, `client-snapshot-${process.pid}-${Date.now()}.db`);
  try {
    await s.backend.snapshot(tmp);
    const fh = await open(tmp, "r");
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
  } finally {
    await rm(tmp, { force: true });
  }
}
