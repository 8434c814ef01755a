/**
 * The test's Prometheus subset on its own (exposition parse, the dashboard's PromQL), on
 * hand-written scrapes with known answers: the metrics suites rely on it to say "returns data".
 */
import { describe, expect, it } from "vitest";
import { bucketBounds, evaluate, labelNames, parseExposition, scrapeOf } from "./prometheus.js";

const T0 = `# HELP grpc_server_started_total Total number of RPCs started on the server.
# TYPE grpc_server_started_total counter
grpc_server_started_total{grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 10
grpc_server_started_total{grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 3
# TYPE grpc_server_handled_total counter
grpc_server_handled_total{grpc_code="OK",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 9
grpc_server_handled_total{grpc_code="Unavailable",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 1
grpc_server_handled_total{grpc_code="OK",grpc_method="Watch",grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"} 1
# TYPE lat histogram
lat_bucket{le="0.1"} 0
lat_bucket{le="0.2"} 0
lat_bucket{le="+Inf"} 0
lat_sum 0
lat_count 0
# TYPE leader_changes counter
leader_changes 1
`;
const T1 = T0.replace("etcdserverpb.KV\",grpc_type=\"unary\"} 10", "etcdserverpb.KV\",grpc_type=\"unary\"} 30")
  .replace('grpc_code="Unavailable",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 1', 'grpc_code="Unavailable",grpc_method="Range",grpc_service="etcdserverpb.KV",grpc_type="unary"} 5')
  .replace('lat_bucket{le="0.1"} 0', 'lat_bucket{le="0.1"} 5')
  .replace('lat_bucket{le="0.2"} 0', 'lat_bucket{le="0.2"} 10')
  .replace('lat_bucket{le="+Inf"} 0', 'lat_bucket{le="+Inf"} 10')
  .replace("leader_changes 1", "leader_changes 2");

describe("the test's Prometheus subset", () => {
  it("parses families with type, labels and buckets", () => {
    const f = parseExposition(T0);
    expect(f.get("grpc_server_started_total")?.type).toBe("counter");
    expect(f.get("grpc_server_started_total")?.help).toBe("Total number of RPCs started on the server.");
    expect(labelNames(f.get("grpc_server_handled_total")!)).toEqual(["grpc_code", "grpc_method", "grpc_service", "grpc_type"]);
    expect(bucketBounds(f.get("lat")!)).toEqual([0.1, 0.2, Infinity]);
    expect(f.get("lat")!.samples).toHaveLength(5);
  });

  it("evaluates the dashboard's query shapes over two scrapes 10 s apart", () => {
    const scrapes = [scrapeOf("a:1", 0, T0), scrapeOf("a:1", 10_000, T1)];
    expect(evaluate('sum(rate(grpc_server_started_total{grpc_type="unary"}[5m]))', scrapes)).toEqual([{ labels: {}, value: 2 }]);
    expect(evaluate('sum(rate(grpc_server_handled_total{grpc_type="unary",grpc_code!="OK"}[5m]))', scrapes)).toEqual([{ labels: {}, value: 0.4 }]);
    expect(
      evaluate('sum(grpc_server_started_total{grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"}) - sum(grpc_server_handled_total{grpc_service="etcdserverpb.Watch",grpc_type="bidi_stream"})', scrapes),
    ).toEqual([{ labels: {}, value: 2 }]);
    const q = evaluate("histogram_quantile(0.99, sum(rate(lat_bucket[5m])) by (instance, le))", scrapes);
    expect(q).toHaveLength(1);
    expect(q[0]!.labels).toEqual({ instance: "a:1" });
    expect(q[0]!.value).toBeCloseTo(0.198, 6);
    expect(evaluate("changes(leader_changes[1d])", scrapes)).toEqual([{ labels: { instance: "a:1" }, value: 1 }]);
    expect(evaluate("sum(leader_changes) by (instance)", scrapes)).toEqual([{ labels: { instance: "a:1" }, value: 2 }]);
    expect(evaluate("nope_total", scrapes)).toEqual([]);
    // Targets are scraped at different instants: an instant vector still sees each one's newest sample.
    const two = [...scrapes, scrapeOf("b:1", 0, T0), scrapeOf("b:1", 10_007, T1)];
    expect(evaluate("sum(leader_changes)", two)).toEqual([{ labels: {}, value: 4 }]);
  });
});
