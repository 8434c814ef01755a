/**
 * etcdserverpb.Watch (etcd's api/v3rpc/watch.go serverWatchStream): one bidi stream carries many
 * watchers. Requests create, cancel, or ask for progress; control responses (created, canceled)
 * are written at once, event responses come from the stream's mvcc WatchStream.
 *
 * Backpressure: the WatchStream is consumed in push mode; when the gRPC write buffer is full the
 * consumer pauses until `drain()`, the WatchStream's bounded buffer fills, and the watchable store
 * parks the stream's watchers (catching them up from the backend later) instead of growing memory.
 */
import { GRPC_OVERHEAD_BYTES, type BidiCall, type MemberHandlers, type MessageCodec } from "../../grpc/index.js";
import type { EventInit, WatchCreateRequest, WatchRequest, WatchResponseInit } from "../../pb/member-types.js";
import type { WatchStream } from "../../mvcc/watch_stream.js";
import type { WatchResponse as MvccWatchResponse } from "../../mvcc/watcher.js";
import type { WatchId } from "../../mvcc/types.js";
import { NONE } from "../../raft/types.js";
import type { Credentials, V3Server } from "../v3_server.js";
import { Errors, toEtcdError } from "../errors.js";
import { GRPC_CODE_NAMES } from "../grpc_metrics.js";
import { loadMemberCodecs } from "../../pb/protos.js";
import { varintBytes } from "../../pb/wire.js";
import { credentialsOf } from "./authorize.js";
import { REQUIRE_LEADER_KEY, requireLeaderIfAsked } from "./guard.js";
import { header } from "./header.js";

/** The id etcd answers with when a create fails (mvcc returns -1 with the error). */
const INVALID_WATCH_ID = -1;
/**
 * The id of etcd 3.4's answer to a progress request ("not associated with any WatchId"). Only
 * this edge writes it, and not through the watchers' buffer: a client may choose -1 for a watcher
 * of its own (etcd 3.4 takes any id but 0), and inside etcetera that watcher and this answer never
 * meet; on the wire they look alike, as they do in etcd.
 */
const PROGRESS_WATCH_ID = -1;
/** etcd's maxNoLeaderCnt: election timeouts without a leader before `hasleader` streams end. */
const MAX_NO_LEADER_COUNT = 3;

export function watchService(s: V3Server): MemberHandlers<"etcdserverpb.Watch"> {
  const monitor = new LeaderLossMonitor(s);
  return {
    Watch: (call, ctx) => {
      requireLeaderIfAsked(s, ctx);
      const sws = new ServerWatchStream(s, call, credentialsOf(ctx), ctx.signal);
      if (ctx.metadata.get(REQUIRE_LEADER_KEY) === "true") monitor.add(sws);
      sws.onClose(() => monitor.delete(sws));
      // etcd keeps a stream whose client half-closed: only cancellation or disconnect end it.
      if (ctx.signal.aborted) return sws.close();
      ctx.signal.addEventListener("abort", () => sws.close(), { once: true });
      sws.start();
    },
  };
}

/** Anything that ends when its member has had no leader for a while (etcd's monitorLeader). */
export interface LeaderBound {
  /** Ends the call with "etcdserver: no leader". */
  loseLeader(): void;
}

/**
 * etcd cancels the streams whose client set `hasleader` once the member has seen no leader for
 * `MAX_NO_LEADER_COUNT` consecutive election timeouts (new requests are refused at once; existing
 * streams get that grace because reconnecting costs more). One timer serves every stream.
 */
export class LeaderLossMonitor {
  private readonly streams = new Set<LeaderBound>();
  private timer: NodeJS.Timeout | undefined;
  private noLeaderCount = 0;

  constructor(private readonly s: V3Server) {}

  add(x: LeaderBound): void {
    this.streams.add(x);
    if (this.timer === undefined) {
      this.noLeaderCount = 0;
      this.timer = setInterval(() => this.check(), this.s.limits.electionMs);
      this.timer.unref();
    }
  }

  delete(x: LeaderBound): void {
    this.streams.delete(x);
    if (this.streams.size === 0 && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private check(): void {
    this.noLeaderCount = this.s.leader() === NONE ? this.noLeaderCount + 1 : 0;
    if (this.noLeaderCount < MAX_NO_LEADER_COUNT) return;
    for (const x of [...this.streams]) x.loseLeader();
  }
}

/** Response sizes for etcd's fragmentation, computed with the wire codecs. */
class ResponseSizer {
  private readonly response: MessageCodec<unknown, WatchResponseInit>;
  private readonly event: MessageCodec<unknown, EventInit>;

  constructor() {
    const codecs = loadMemberCodecs();
    this.response = codecs.message<unknown, WatchResponseInit>("etcdserverpb.WatchResponse");
    this.event = codecs.message<unknown, EventInit>("mvccpb.Event");
  }

  /** Encoded size of `wr` without its events. */
  base(wr: WatchResponseInit): number {
    return this.response.encode({ ...wr, events: [], fragment: true }).length;
  }

  /** Bytes one event adds to the repeated field (tag, length, body). */
  event1(ev: EventInit): number {
    const n = this.event.encode(ev).length;
    return 1 + varintBytes(n) + n;
  }
}

let sizer: ResponseSizer | undefined;

/**
 * etcd's sendFragments: a response at least `maxBytes` long with two or more events is split
 * into several, each below `maxBytes` unless one event alone exceeds it; every part but the
 * last carries `fragment: true`.
 */
export function fragmentResponse(wr: WatchResponseInit, maxBytes: number): WatchResponseInit[] {
  const events = wr.events ?? [];
  if (events.length < 2) return [wr];
  sizer ??= new ResponseSizer();
  const base = sizer.base(wr);
  const sizes = events.map((ev) => sizer!.event1(ev));
  const total = sizes.reduce((a, b) => a + b, base);
  if (total < maxBytes) return [wr];
  const parts: WatchResponseInit[] = [];
  let i = 0;
  while (i < events.length) {
    let size = base;
    const start = i;
    while (i < events.length) {
      if (i > start && size + sizes[i]! >= maxBytes) break;
      size += sizes[i]!;
      i++;
    }
    parts.push({ ...wr, events: events.slice(start, i), fragment: i < events.length });
  }
  return parts;
}

class ServerWatchStream implements LeaderBound {
  private readonly ws: WatchStream;
  private readonly fragmented = new Set<WatchId>();
  private readonly maxResponseBytes: number;
  private closed = false;
  private readonly closeListeners: Array<() => void> = [];
  /** Requests behind a create waiting for its permission check (handled in arrival order). */
  private queued = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly s: V3Server,
    private readonly call: BidiCall<WatchRequest, WatchResponseInit>,
    private readonly credentials: Credentials,
    private readonly signal: AbortSignal,
  ) {
    this.ws = s.watchStream();
    this.maxResponseBytes = s.limits.maxRequestBytes + GRPC_OVERHEAD_BYTES;
  }

  start(): void {
    this.ws.setHandler((r) => this.sendEvents(r));
    this.call.onMessage((req) => this.onRequest(req));
  }

  onClose(f: () => void): void {
    this.closeListeners.push(f);
  }

  loseLeader(): void {
    this.call.fail(Errors.noLeader());
    this.close();
  }

  /** Releases the watchers; idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.s.closeWatchStream(this.ws);
    for (const f of this.closeListeners.splice(0)) f();
  }

  private onRequest(req: WatchRequest): void {
    if (this.closed || this.call.ended) return;
    // etcd checks each create against the identity the stream's token stands for at that moment;
    // with no token and auth disabled there is nothing to wait for.
    const check = req.createRequest != null && (this.credentials.token !== undefined || this.s.authEnabled());
    if (!check && this.queued === 0) return this.handle(req);
    this.queued++;
    this.queue = this.queue.then(async () => {
      try {
        const refusal = req.createRequest != null && check ? await this.watchRefusal(req.createRequest) : undefined;
        if (refusal !== undefined) {
          if (this.closed || this.call.ended) return;
          const rev = this.s.currentRevision();
          this.control({ header: header(this.s, rev), watchId: INVALID_WATCH_ID, created: true, canceled: true, cancelReason: refusal });
          return;
        }
        if (!this.closed && !this.call.ended) this.handle(req);
      } finally {
        this.queued--;
      }
    });
  }

  /**
   * etcd's isWatchPermitted: undefined when the create may go ahead, else the cancel reason, the
   * gRPC error's Error() text ("rpc error: code = ... desc = ...") as etcd 3.4 sends it: an invalid
   * token, an old auth revision and a missing user name are told as such, anything else is
   * "permission denied".
   */
  private async watchRefusal(creq: WatchCreateRequest): Promise<string | undefined> {
    try {
      const ai = await this.s.identify(this.credentials, this.signal);
      this.s.withAuth(ai).isRangePermitted(creq.key, creq.rangeEnd);
      return undefined;
    } catch (e) {
      const told = [Errors.invalidAuthToken(), Errors.authOldRevision(), Errors.userEmpty()];
      const err = told.find((t) => t.message === toEtcdError(e).message) ?? Errors.permissionDenied();
      return `rpc error: code = ${GRPC_CODE_NAMES[err.code]!} desc = ${err.message}`;
    }
  }

  private handle(req: WatchRequest): void {
    if (req.createRequest != null) this.create(req.createRequest);
    else if (req.cancelRequest != null) this.cancel(req.cancelRequest.watchId ?? 0);
    else if (req.progressRequest != null) this.progress();
    // An empty request is ignored, as etcd does.
  }

  private create(creq: WatchCreateRequest): void {
    const rev = this.s.currentRevision();
    let id: WatchId;
    try {
      id = this.ws.watch({
        key: creq.key,
        rangeEnd: creq.rangeEnd,
        startRevision: creq.startRevision,
        prevKv: creq.prevKv,
        filters: creq.filters,
        progressNotify: creq.progressNotify,
        id: creq.watchId,
      });
    } catch (e) {
      // etcd answers a refused create on the stream (created and canceled at once), not with an error status.
      this.control({ header: header(this.s, rev), watchId: INVALID_WATCH_ID, created: true, canceled: true, cancelReason: (e as Error).message });
      return;
    }
    if (creq.fragment) this.fragmented.add(id);
    this.control({ header: header(this.s, rev), watchId: id, created: true });
  }

  /**
   * etcd 3.4's recvLoop answers a progress request at once, on the control path: the store's
   * current revision and watch id -1, nothing else. It does not wait for the stream's watchers to
   * catch up (that is 3.5's RequestProgressAll), so the revision may be ahead of events a watcher
   * still has to receive; a client that needs "seen everything up to R" uses progress_notify.
   */
  private progress(): void {
    this.control({ header: header(this.s), watchId: PROGRESS_WATCH_ID });
  }

  private cancel(id: WatchId): void {
    // An unknown id gets no answer (etcd ignores the mvcc error).
    if (!this.ws.cancel(id)) return;
    this.fragmented.delete(id);
    this.control({ header: header(this.s), watchId: id, canceled: true });
  }

  /**
   * Control responses bypass the event buffer (a created response must precede the watcher's
   * events, which cannot exist yet). A full socket stops reading requests until it drains, so a
   * client that sends requests without reading responses cannot grow this side's memory.
   */
  private control(wr: WatchResponseInit): void {
    if (this.call.write(wr)) return;
    this.call.pause();
    void this.call.drain().then(() => this.call.resume());
  }

  /** The WatchStream's push handler: false pauses it until the socket drains. */
  private sendEvents(r: MvccWatchResponse): boolean {
    if (this.closed || this.call.ended) return true;
    const wr: WatchResponseInit = {
      // etcd's compaction cancel carries no revision (its mvcc response leaves it 0).
      header: header(this.s, r.compactRevision ? 0 : r.revision),
      watchId: r.watchId,
      events: r.events,
      compactRevision: r.compactRevision ?? 0,
      // etcd marks a compaction response canceled only when its revision is not 0 (its sendLoop's
      // `canceled := wresp.CompactRevision != 0`): after a Compact at revision 0, a watch from a
      // negative start is dropped with compact_revision 0 and canceled false. Found by the RPC fuzzer.
      canceled: r.compactRevision !== undefined ? r.compactRevision !== 0 : r.canceled === true,
    };
    if (r.canceled) this.fragmented.delete(r.watchId);
    const parts = this.fragmented.has(r.watchId) ? fragmentResponse(wr, this.maxResponseBytes) : [wr];
    let room = true;
    for (const p of parts) room = this.call.write(p) && room;
    if (room) return true;
    void this.call.drain().then(() => {
      if (!this.closed) this.ws.resume();
    });
    return false;
  }
}
