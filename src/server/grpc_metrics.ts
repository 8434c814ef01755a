/**
 * The client port's gRPC metrics under the names go-grpc-prometheus gives them in etcd 3.4
 * (grpc_server_started_total, grpc_server_handled_total, grpc_server_msg_received_total,
 * grpc_server_msg_sent_total; grpc_server_handling_seconds with --metrics=extensive), plus etcd's
 * own etcd_network_client_grpc_{received,sent}_bytes_total and etcd_server_client_requests_total.
 *
 * Labels and values are go-grpc-prometheus's: grpc_type unary|client_stream|server_stream|
 * bidi_stream, grpc_code as grpc-go's codes.Code String() ("OK", "Canceled", "Unavailable", ...).
 * Every series of a registered method starts at 0 (as grpc_prometheus.Register does), so a
 * dashboard's rate() sees a series before the first call and an error rate before the first error.
 *
 * Fed by the one CallObserver every call of src/grpc/call.ts reports to. One observer per member,
 * shared by all its client URLs (one registry).
 */
import { Counter, Histogram, type Registry } from "prom-client";
import type { CallObserver, MethodDescriptor } from "../grpc/index.js";
import { Status } from "../grpc/index.js";

/** grpc-go's codes.Code.String(), by code number. */
export const GRPC_CODE_NAMES: readonly string[] = [
  "OK",
  "Canceled",
  "Unknown",
  "InvalidArgument",
  "DeadlineExceeded",
  "NotFound",
  "AlreadyExists",
  "PermissionDenied",
  "ResourceExhausted",
  "FailedPrecondition",
  "Aborted",
  "OutOfRange",
  "Unimplemented",
  "Internal",
  "Unavailable",
  "DataLoss",
  "Unauthenticated",
];

/** prometheus.DefBuckets: go-grpc-prometheus's default for grpc_server_handling_seconds. */
const HANDLING_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

type MethodLabel = "grpc_type" | "grpc_service" | "grpc_method";

function grpcType(m: MethodDescriptor): string {
  if (m.requestStream) return m.responseStream ? "bidi_stream" : "client_stream";
  return m.responseStream ? "server_stream" : "unary";
}

/**
 * Increments of one labelled series kept as a plain number and handed to prom-client when it
 * collects (a scrape, or a test's get()): a call then costs additions instead of prom-client's
 * label hashing per increment, which took 3.5% of a leader's main thread under put load at 1,000
 * clients (bench/compare/profile.ts; issue 18).
 */
interface Pending<L extends string> {
  labels: Record<L, string>;
  n: number;
}

function pending<L extends string>(labels: Record<L, string>): Pending<L> {
  return { labels, n: 0 };
}

function flushInto<L extends string>(counter: Counter<L>, all: Iterable<Pending<L> | undefined>): void {
  for (const p of all) {
    if (p === undefined || p.n === 0) continue;
    counter.inc(p.labels, p.n);
    p.n = 0;
  }
}

interface MethodSeries {
  labels: Record<MethodLabel, string>;
  /** "unary" or "stream": etcd_server_client_requests_total's type. */
  requestType: string;
  started: Pending<MethodLabel>;
  received: Pending<MethodLabel>;
  sent: Pending<MethodLabel>;
  /** grpc_server_handled_total's series by status code, built on first use. */
  handled: Array<Pending<MethodLabel | "grpc_code"> | undefined>;
}

export interface GrpcMetricsOptions {
  /** --metrics: "extensive" adds grpc_server_handling_seconds. */
  level: "basic" | "extensive";
}

export function grpcMetrics(registry: Registry, o: GrpcMetricsOptions): CallObserver {
  const registers = [registry];
  const methodLabels: MethodLabel[] = ["grpc_type", "grpc_service", "grpc_method"];
  // Label objects and pending counts built once per method, not per call.
  const byPath = new Map<string, MethodSeries>();
  // By request type, then client version: a key concatenated per call was a string to flatten and
  // hash on every request (issue 18).
  const clientRequestsPending = new Map<string, Map<string, Pending<"type" | "client_api_version">>>();
  const bytes = { received: 0, sent: 0 };
  const methods = () => byPath.values();
  /** A per-method counter whose pending counts (one of each method's series) are handed over at collect. */
  const methodCounter = (name: string, help: string, pick: (m: MethodSeries) => Pending<MethodLabel>) =>
    new Counter({
      name,
      help,
      labelNames: methodLabels,
      registers,
      collect() {
        flushInto(this, Array.from(methods(), pick));
      },
    });
  const started = methodCounter("grpc_server_started_total", "Total number of RPCs started on the server.", (m) => m.started);
  const handled = new Counter({
    name: "grpc_server_handled_total",
    help: "Total number of RPCs completed on the server, regardless of success or failure.",
    labelNames: [...methodLabels, "grpc_code"],
    registers,
    collect() {
      for (const m of methods()) flushInto(this, m.handled);
    },
  });
  const received = methodCounter("grpc_server_msg_received_total", "Total number of RPC stream messages received on the server.", (m) => m.received);
  const sent = methodCounter("grpc_server_msg_sent_total", "Total number of gRPC stream messages sent by the server.", (m) => m.sent);
  const handling =
    o.level === "extensive"
      ? new Histogram({
          name: "grpc_server_handling_seconds",
          help: "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.",
          labelNames: methodLabels,
          buckets: HANDLING_BUCKETS,
          registers,
        })
      : undefined;
  /** A byte counter of one direction, handed its pending total at collect. */
  const bytesCounter = (name: string, help: string, side: keyof typeof bytes) =>
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.inc(bytes[side]);
        bytes[side] = 0;
      },
    });
  bytesCounter("etcd_network_client_grpc_received_bytes_total", "The total number of bytes received from grpc clients.", "received");
  bytesCounter("etcd_network_client_grpc_sent_bytes_total", "The total number of bytes sent to grpc clients.", "sent");
  new Counter({
    name: "etcd_server_client_requests_total",
    help: "The total number of client requests per client version.",
    labelNames: ["type", "client_api_version"],
    registers,
    collect() {
      for (const byVersion of clientRequestsPending.values()) flushInto(this, byVersion.values());
    },
  });

  const series = (m: MethodDescriptor): MethodSeries => {
    let s = byPath.get(m.path);
    if (s === undefined) {
      const type = grpcType(m);
      const labels = { grpc_type: type, grpc_service: m.service, grpc_method: m.name };
      s = { labels, requestType: type === "unary" ? "unary" : "stream", started: pending(labels), received: pending(labels), sent: pending(labels), handled: [] };
      byPath.set(m.path, s);
    }
    return s;
  };

  return {
    registered(m) {
      const { labels } = series(m);
      started.inc(labels, 0);
      received.inc(labels, 0);
      sent.inc(labels, 0);
      for (const grpc_code of GRPC_CODE_NAMES) handled.inc({ ...labels, grpc_code }, 0);
      if (handling !== undefined) handling.zero(labels);
    },
    started(m, clientApiVersion) {
      const s = series(m);
      s.started.n++;
      const version = clientApiVersion ?? "unknown";
      let byVersion = clientRequestsPending.get(s.requestType);
      if (byVersion === undefined) clientRequestsPending.set(s.requestType, (byVersion = new Map()));
      let c = byVersion.get(version);
      if (c === undefined) byVersion.set(version, (c = pending({ type: s.requestType, client_api_version: version })));
      c.n++;
    },
    handled(m, code, seconds) {
      const s = series(m);
      (s.handled[code] ??= pending({ ...s.labels, grpc_code: grpcCodeName(code) })).n++;
      handling?.observe(s.labels, seconds);
    },
    received(m, n) {
      series(m).received.n++;
      bytes.received += n;
    },
    sent(m, n) {
      series(m).sent.n++;
      bytes.sent += n;
    },
  };
}

/** The name of a status code as grpc_server_handled_total labels it (exported for tests). */
export function grpcCodeName(code: Status): string {
  return GRPC_CODE_NAMES[code] ?? GRPC_CODE_NAMES[Status.UNKNOWN]!;
}
