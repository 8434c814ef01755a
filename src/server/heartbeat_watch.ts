/**
 * etcd's late-heartbeat detector (pkg/contention's TimeoutDetector, used by etcdserver/raft.go's
 * processMessages): the leader remembers when it last sent a heartbeat to each peer; one sent more
 * than twice the heartbeat interval after the previous is "failed to send out heartbeat on time",
 * a warning and etcd_server_heartbeat_send_failures_total. It means the member's loop was late
 * (an overloaded event loop, a slow disk), and it is what etcd's alert on that counter watches.
 */
import { Counter, type Registry } from "prom-client";
import { MessageType, type Message, type NodeId } from "../raft/types.js";
import type { Logger } from "./logger.js";

export interface HeartbeatWatchOptions {
  registry: Registry;
  heartbeatMs: number;
  logger: Logger;
  now?: () => number;
}

export class HeartbeatWatch {
  /** Last heartbeat sent, by peer id (the bigint itself: no string made per heartbeat). */
  private readonly lastSentMs = new Map<NodeId, number>();
  private readonly failures: Counter;
  private readonly maxGapMs: number;
  private readonly now: () => number;

  constructor(private readonly o: HeartbeatWatchOptions) {
    this.maxGapMs = 2 * o.heartbeatMs;
    this.now = o.now ?? (() => performance.now());
    this.failures = new Counter({
      name: "etcd_server_heartbeat_send_failures_total",
      help: "The total number of leader heartbeat send failures (likely overloaded from slow disk).",
      registers: [o.registry],
    });
  }

  /** Observes the heartbeats among `msgs` (the leader's outgoing messages of one Ready). */
  observe(msgs: readonly Message[]): void {
    for (const m of msgs) {
      if (m.type !== MessageType.MsgHeartbeat) continue;
      const now = this.now();
      const last = this.lastSentMs.get(m.to);
      this.lastSentMs.set(m.to, now);
      if (last === undefined || now - last <= this.maxGapMs) continue;
      const exceededMs = Math.round(now - last - this.maxGapMs);
      this.o.logger.warn(
        { "to": m.to.toString(16), "heartbeat-interval": `${this.o.heartbeatMs}ms`, "expected-duration": `${this.maxGapMs}ms`, "exceeded-duration": `${exceededMs}ms` },
        "leader failed to send out heartbeat on time; took too long, leader is overloaded likely from slow disk",
      );
      this.failures.inc();
    }
  }

  /** Forgets every peer (etcd resets the detector when the member becomes leader). */
  reset(): void {
    this.lastSentMs.clear();
  }
}
