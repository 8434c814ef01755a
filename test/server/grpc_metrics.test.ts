/**
 * The client port's gRPC metrics (src/server/grpc_metrics.ts) fed by hand: go-grpc-prometheus's
 * names, labels and code names, every series of a registered method at 0, bytes counted, the
 * handling histogram only with --metrics=extensive.
 */
import { Registry } from "prom-client";
import { describe, expect, it } from "vitest";
import type { MethodDescriptor } from "../../src/grpc/index.js";
import { Status } from "../../src/grpc/status.js";
import { GRPC_CODE_NAMES, grpcCodeName, grpcMetrics } from "../../src/server/grpc_metrics.js";

function method(service: string, name: string, requestStream: boolean, responseStream: boolean): MethodDescriptor {
  return { path: `/${service}/${name}`, service, name, requestStream, responseStream } as unknown as MethodDescriptor;
}

const RANGE = method("etcdserverpb.KV", "Range", false, false);
const WATCH = method("etcdserverpb.Watch", "Watch", true, true);
const SNAPSHOT = method("etcdserverpb.Maintenance", "Snapshot", false, true);

/** The samples named `name` (a histogram's _bucket/_count/_sum by their own names). */
async function values(registry: Registry, name: string): Promise<Array<{ labels: Record<string, string | number>; value: number }>> {
  const family = name.replace(/_(bucket|count|sum)$/, "");
  const m = registry.getSingleMetric(name) ?? registry.getSingleMetric(family);
  if (m === undefined) throw new Error(`no ${name}`);
  return (await m.get()).values
    .filter((v) => ((v as { metricName?: string }).metricName ?? family) === name)
    .map((v) => ({ labels: v.labels as Record<string, string | number>, value: v.value }));
}

describe("gRPC server metrics", () => {
  it("names codes as grpc-go does", () => {
    expect(GRPC_CODE_NAMES).toHaveLength(17);
    expect(grpcCodeName(Status.OK)).toBe("OK");
    expect(grpcCodeName(Status.CANCELLED)).toBe("Canceled");
    expect(grpcCodeName(Status.UNAVAILABLE)).toBe("Unavailable");
    expect(grpcCodeName(Status.UNAUTHENTICATED)).toBe("Unauthenticated");
  });

  it("starts every series of a registered method at 0, with go-grpc-prometheus's grpc_type", async () => {
    const registry = new Registry();
    const o = grpcMetrics(registry, { level: "basic" });
    o.registered?.(RANGE);
    o.registered?.(WATCH);
    o.registered?.(SNAPSHOT);
    const started = await values(registry, "grpc_server_started_total");
    expect(started.map((v) => v.labels.grpc_type).sort()).toEqual(["bidi_stream", "server_stream", "unary"]);
    expect(started.every((v) => v.value === 0)).toBe(true);
    const handled = await values(registry, "grpc_server_handled_total");
    expect(handled).toHaveLength(3 * 17);
    expect(new Set(handled.map((v) => v.labels.grpc_code))).toEqual(new Set(GRPC_CODE_NAMES));
    expect(registry.getSingleMetric("grpc_server_handling_seconds")).toBeUndefined();
  });

  it("counts starts, ends by code, messages and their bytes, and client versions", async () => {
    const registry = new Registry();
    const o = grpcMetrics(registry, { level: "extensive" });
    o.registered?.(RANGE);
    o.started(RANGE, "3.4");
    o.received(RANGE, 10);
    o.sent(RANGE, 100);
    o.handled(RANGE, Status.OK, 0.002);
    o.started(RANGE, undefined);
    o.received(RANGE, 12);
    o.handled(RANGE, Status.UNAVAILABLE, 0.3);
    o.started(WATCH, "3.4");
    const find = async (name: string, labels: Record<string, string>) =>
      (await values(registry, name)).find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;
    expect(await find("grpc_server_started_total", { grpc_method: "Range" })).toBe(2);
    expect(await find("grpc_server_handled_total", { grpc_method: "Range", grpc_code: "OK" })).toBe(1);
    expect(await find("grpc_server_handled_total", { grpc_method: "Range", grpc_code: "Unavailable" })).toBe(1);
    expect(await find("grpc_server_msg_received_total", { grpc_method: "Range" })).toBe(2);
    expect(await find("grpc_server_msg_sent_total", { grpc_method: "Range" })).toBe(1);
    expect((await values(registry, "etcd_network_client_grpc_received_bytes_total"))[0]!.value).toBe(22);
    expect((await values(registry, "etcd_network_client_grpc_sent_bytes_total"))[0]!.value).toBe(100);
    expect(await find("etcd_server_client_requests_total", { type: "unary", client_api_version: "3.4" })).toBe(1);
    expect(await find("etcd_server_client_requests_total", { type: "unary", client_api_version: "unknown" })).toBe(1);
    expect(await find("etcd_server_client_requests_total", { type: "stream", client_api_version: "3.4" })).toBe(1);
    expect(await find("grpc_server_handling_seconds_count", { grpc_method: "Range" })).toBe(2);
    const buckets = (await values(registry, "grpc_server_handling_seconds_bucket")).filter((v) => v.labels.grpc_method === "Range");
    expect(buckets.find((v) => v.labels.le === 0.005)?.value).toBe(1);
    expect(buckets.find((v) => v.labels.le === 0.5)?.value).toBe(2);
  });

  it("counts kept between scrapes are handed over once: a second scrape neither loses nor repeats them", async () => {
    const registry = new Registry();
    const o = grpcMetrics(registry, { level: "basic" });
    o.registered?.(RANGE);
    const line = (text: string, name: string) => text.split("\n").find((l) => l.startsWith(name) && (l.includes('grpc_method="Range"') || !l.includes("{")))?.split(" ").pop();
    for (let i = 0; i < 3; i++) o.received(RANGE, 5);
    const first = await registry.metrics();
    expect(line(first, "grpc_server_msg_received_total")).toBe("3");
    expect(line(first, "etcd_network_client_grpc_received_bytes_total")).toBe("15");
    const again = await registry.metrics();
    expect(line(again, "grpc_server_msg_received_total")).toBe("3");
    expect(line(again, "etcd_network_client_grpc_received_bytes_total")).toBe("15");
    o.received(RANGE, 1);
    o.handled(RANGE, Status.OK, 0.001);
    const later = await registry.metrics();
    expect(line(later, "grpc_server_msg_received_total")).toBe("4");
    expect(line(later, "etcd_network_client_grpc_received_bytes_total")).toBe("16");
    expect(later).toContain('grpc_server_handled_total{grpc_type="unary",grpc_service="etcdserverpb.KV",grpc_method="Range",grpc_code="OK"} 1');
  });
});
