/**
 * etcd 3.4's /health (etcdserver/api/etcdhttp/metrics.go), served on the client port and on every
 * --listen-metrics-urls: GET only (405 "Method Not Allowed" with `Allow: GET` otherwise); 200
 * `{"health":"true"}` when the member is healthy, else 503 `{"health":"false"}` written as Go's
 * http.Error writes it (text/plain, nosniff, a trailing newline). etcd 3.4's body has no
 * "reason" field (3.5 added one); the reason goes to the log, as etcd's warnings do.
 *
 * Unhealthy, checked in etcd's order: any active alarm (NOSPACE, CORRUPT); no leader known; a
 * quorum read that does not complete within a second. etcd 3.4 does that read as a v2 QGET
 * through raft; here it is a ReadIndex round, which proves the same thing (a leader that still
 * has a quorum and this member caught up to it) without writing to the log.
 *
 * Each answer counts in etcd_server_health_success or etcd_server_health_failures.
 */
import type { HttpResponse } from "../grpc/index.js";
import { NONE, type NodeId } from "../raft/types.js";
import { AlarmType, type AlarmMember } from "./alarms.js";
import type { Logger } from "./logger.js";
import { formatId } from "./member.js";

/** etcd's QGET timeout in checkHealth. */
export const HEALTH_READ_TIMEOUT_MS = 1000;

export interface HealthSource {
  alarms(): AlarmMember[];
  leader(): NodeId;
  /** Resolves once a quorum read would be answered (rejects on timeout or no leader). */
  linearizableRead(): Promise<void>;
}

export interface HealthCounters {
  healthSuccess: { inc(): void };
  healthFailures: { inc(): void };
}

export interface HealthResult {
  healthy: boolean;
  /** Why not (for the log and /readyz), "" when healthy. */
  reason: string;
}

/** etcd's alarm names in its warnings ("memberID:… alarm:NOSPACE"). */
function alarmText(a: AlarmMember): string {
  return `memberID:${formatId(a.memberID)} alarm:${AlarmType[a.alarm] ?? a.alarm} `;
}

function timeout(ms: number): { promise: Promise<never>; cancel(): void } {
  let timer: NodeJS.Timeout | undefined;
  const promise = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error("etcdserver: request timed out")), ms);
  });
  return { promise, cancel: () => clearTimeout(timer) };
}

export async function checkHealth(src: HealthSource, counters: HealthCounters, logger: Logger, readTimeoutMs = HEALTH_READ_TIMEOUT_MS): Promise<HealthResult> {
  const result = await check(src, logger, readTimeoutMs);
  if (result.healthy) counters.healthSuccess.inc();
  else counters.healthFailures.inc();
  return result;
}

async function check(src: HealthSource, logger: Logger, readTimeoutMs: number): Promise<HealthResult> {
  const alarms = src.alarms();
  if (alarms.length > 0) {
    for (const a of alarms) logger.warn({ alarm: alarmText(a) }, `/health error due to an alarm ${alarmText(a)}`);
    return { healthy: false, reason: "ALARM ACTIVE" };
  }
  if (src.leader() === NONE) {
    logger.warn("/health error; no leader (status code 503)");
    return { healthy: false, reason: "RAFT NO LEADER" };
  }
  const t = timeout(readTimeoutMs);
  try {
    await Promise.race([src.linearizableRead(), t.promise]);
  } catch (err) {
    logger.warn(`/health error; QGET failed ${(err as Error).message} (status code 503)`);
    return { healthy: false, reason: "QGET FAILED" };
  } finally {
    t.cancel();
  }
  return { healthy: true, reason: "" };
}

/** The /health answer as etcd 3.4 writes it. */
export function healthResponse(result: HealthResult): HttpResponse {
  if (result.healthy) return { status: 200, headers: { "content-type": "text/plain; charset=utf-8" }, body: '{"health":"true"}' };
  return goHttpError(503, '{"health":"false"}');
}

/** Go's http.Error: text/plain, nosniff, the text and a newline. */
export function goHttpError(status: number, text: string, extraHeaders: Record<string, string> = {}): HttpResponse {
  return {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", "x-content-type-options": "nosniff", ...extraHeaders },
    body: `${text}\n`,
  };
}

/** What /health answers a method other than GET. */
export const HEALTH_METHOD_NOT_ALLOWED: HttpResponse = goHttpError(405, "Method Not Allowed", { allow: "GET" });
