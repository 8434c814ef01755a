/**
 * The quota counts the database's size as etcd does (bbolt's high-water page times its page
 * size), not the files on disk: a burst of writes whose data is well under
 * --quota-backend-bytes is accepted, and the size the member reports (endpoint status dbSize,
 * etcd_mvcc_db_total_size_in_bytes) holds every value once. Before, etcetera counted its SQLite
 * -wal on top of the database file, and a -wal that grew with the burst took the member past its
 * quota with half of it in use. Both targets (E2E_TARGET=etcd).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, unary } from "./grpc_client.js";
import { Cluster } from "./harness.js";

const QUOTA_BYTES = 48 * 1024 * 1024;
const VALUE_BYTES = 64 * 1024;
/** 28 MiB of values: 58% of the quota. */
const KEYS = 448;
const CONCURRENCY = 16;

let cluster: Cluster;
let c: ReturnType<typeof clients>;
const b = (s: string) => Buffer.from(s);

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1, metrics: true, extraArgs: [`--quota-backend-bytes=${QUOTA_BYTES}`] });
  await cluster.start();
  c = clients(cluster.members[0]!.endpoint);
});
afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

async function dbTotalSizeMetric(): Promise<number> {
  const text = await (await fetch(`${cluster.members[0]!.metricsUrl}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("etcd_mvcc_db_total_size_in_bytes "));
  expect(line, "etcd_mvcc_db_total_size_in_bytes is exported").toBeDefined();
  return Number(line!.split(" ")[1]);
}

describe("the backend quota counts the database, not its files", () => {
  it("a burst of writes to 58% of the quota is accepted, and the reported size holds each value once", async () => {
    const value = Buffer.alloc(VALUE_BYTES, 9);
    let next = 0;
    const refused: string[] = [];
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < KEYS) {
          const i = next++;
          try {
            await unary(c.kv, "Put", { key: b(`burst/${String(i).padStart(4, "0")}`), value });
          } catch (e) {
            refused.push(`burst/${i}: ${(e as { details?: string }).details ?? String(e)}`);
          }
        }
      }),
    );
    expect(refused, "no put refused").toEqual([]);
    const alarms = await unary<{ alarms: Array<{ alarm: string }> }>(c.maintenance, "Alarm", { action: "GET" });
    expect(alarms.alarms, "no NOSPACE alarm").toEqual([]);
    const count = await unary<{ count: string }>(c.kv, "Range", { key: b("burst/"), range_end: b("burst0"), count_only: true });
    expect(Number(count.count)).toBe(KEYS);

    // Once the last batch is committed (etcd: every 100 ms), status and the metric agree.
    await new Promise((r) => setTimeout(r, 500));
    const status = await unary<{ dbSize: string; dbSizeInUse: string }>(c.maintenance, "Status", {});
    const dbSize = Number(status.dbSize);
    expect(dbSize, "every value is counted").toBeGreaterThanOrEqual(KEYS * VALUE_BYTES);
    expect(dbSize, "each value is counted once").toBeLessThan(1.5 * KEYS * VALUE_BYTES);
    expect(Number(status.dbSizeInUse)).toBeLessThanOrEqual(dbSize);
    expect(await dbTotalSizeMetric()).toBe(dbSize);
  });
});
