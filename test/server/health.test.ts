/**
 * etcd 3.4's health check (src/server/health.ts) on its own: alarms first, then the leader, then a
 * quorum read within the timeout; each answer counted; the HTTP answer as Go writes it.
 */
import { describe, expect, it } from "vitest";
import { AlarmType } from "../../src/server/alarms.js";
import { checkHealth, HEALTH_METHOD_NOT_ALLOWED, healthResponse, type HealthSource } from "../../src/server/health.js";
import { silentLogger } from "../../src/server/logger.js";

function setup(over: Partial<HealthSource> = {}) {
  const counts = { ok: 0, failed: 0 };
  const counters = { healthSuccess: { inc: () => counts.ok++ }, healthFailures: { inc: () => counts.failed++ } };
  const src: HealthSource = { alarms: () => [], leader: () => 7n, linearizableRead: () => Promise.resolve(), ...over };
  return { counts, run: (timeoutMs = 50) => checkHealth(src, counters, silentLogger(), timeoutMs) };
}

describe("health check", () => {
  it("is healthy with no alarm, a leader and a quorum read", async () => {
    const { counts, run } = setup();
    expect(await run()).toEqual({ healthy: true, reason: "" });
    expect(counts).toEqual({ ok: 1, failed: 0 });
  });

  it("is unhealthy with an alarm (before looking at the leader), without a leader, or when the read fails or is late", async () => {
    const read = { calls: 0 };
    const alarm = setup({ alarms: () => [{ memberID: 1n, alarm: AlarmType.NOSPACE }], leader: () => 0n, linearizableRead: () => (read.calls++, Promise.resolve()) });
    expect(await alarm.run()).toEqual({ healthy: false, reason: "ALARM ACTIVE" });
    expect(read.calls).toBe(0);
    const corrupt = setup({ alarms: () => [{ memberID: 1n, alarm: AlarmType.CORRUPT }] });
    expect((await corrupt.run()).healthy).toBe(false);
    const noLeader = setup({ leader: () => 0n });
    expect(await noLeader.run()).toEqual({ healthy: false, reason: "RAFT NO LEADER" });
    const failed = setup({ linearizableRead: () => Promise.reject(new Error("etcdserver: leader changed")) });
    expect(await failed.run()).toEqual({ healthy: false, reason: "QGET FAILED" });
    const late = setup({ linearizableRead: () => new Promise(() => {}) });
    const started = Date.now();
    expect(await late.run(100)).toEqual({ healthy: false, reason: "QGET FAILED" });
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    expect(late.counts).toEqual({ ok: 0, failed: 1 });
  });

  it("answers as etcd 3.4's handler writes it", () => {
    expect(healthResponse({ healthy: true, reason: "" })).toEqual({ status: 200, headers: { "content-type": "text/plain; charset=utf-8" }, body: '{"health":"true"}' });
    const bad = healthResponse({ healthy: false, reason: "RAFT NO LEADER" });
    expect(bad.status).toBe(503);
    expect(bad.body).toBe('{"health":"false"}\n');
    expect(bad.headers?.["x-content-type-options"]).toBe("nosniff");
    expect(HEALTH_METHOD_NOT_ALLOWED.status).toBe(405);
    expect(HEALTH_METHOD_NOT_ALLOWED.headers?.allow).toBe("GET");
  });
});
