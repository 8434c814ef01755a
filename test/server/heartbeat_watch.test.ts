/**
 * The late-heartbeat detector: a heartbeat to a peer more than twice the heartbeat interval after
 * the previous one to that peer counts in etcd_server_heartbeat_send_failures_total and warns;
 * other messages, a first heartbeat and one after a reset count nothing.
 */
import { pino } from "pino";
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import { MessageType, type Message } from "../../src/raft/types.js";
import { HeartbeatWatch } from "../../src/server/heartbeat_watch.js";

const hb = (to: number): Message => ({ type: MessageType.MsgHeartbeat, to } as unknown as Message);
const app = (to: number): Message => ({ type: MessageType.MsgApp, to } as unknown as Message);

async function failures(registry: Registry): Promise<number> {
  const m = await registry.getSingleMetric("etcd_server_heartbeat_send_failures_total")!.get();
  return m.values[0]?.value ?? 0;
}

describe("HeartbeatWatch", () => {
  it("counts a heartbeat sent late to a peer, per peer, and forgets peers on reset", async () => {
    const registry = new Registry();
    const warnings: string[] = [];
    const logger = pino({ level: "warn" }, { write: (s: string) => void warnings.push(s) });
    let now = 0;
    const w = new HeartbeatWatch({ registry, heartbeatMs: 100, logger, now: () => now });
    expect(await failures(registry)).toBe(0);
    w.observe([hb(2), hb(3)]);
    now = 200;
    w.observe([hb(2), app(3)]);
    expect(await failures(registry)).toBe(0);
    now = 401;
    // 2: 201 ms after its last (late); 3: 401 ms after its last (late); the append counts nothing.
    w.observe([hb(2), hb(3), app(2)]);
    expect(await failures(registry)).toBe(2);
    expect(warnings.length).toBe(2);
    expect(warnings[0]).toContain("failed to send out heartbeat on time");
    w.reset();
    now = 5_000;
    w.observe([hb(2)]);
    expect(await failures(registry)).toBe(2);
  });

  it("names the peer in hex, as etcd's log does (fmt %x of the id)", () => {
    const warnings: string[] = [];
    const logger = pino({ level: "warn" }, { write: (s: string) => void warnings.push(s) });
    let now = 0;
    const w = new HeartbeatWatch({ registry: new Registry(), heartbeatMs: 100, logger, now: () => now });
    const to = { type: MessageType.MsgHeartbeat, to: 0xd35e062b0036cc3an } as unknown as Message;
    w.observe([to]);
    now = 500;
    w.observe([to]);
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!).to).toBe("d35e062b0036cc3a");
  });
});
