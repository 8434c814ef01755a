/**
 * The plain-HTTP routes of the client and metrics ports that etcd users script against:
 * /metrics (Prometheus text), /health (health.ts), /version, /debug/vars (debug_vars.ts) and,
 * with --enable-pprof, /debug/pprof/ (pprof.ts). The metrics port (--listen-metrics-urls) serves
 * /metrics and /health, as etcd's does. The JSON gateway comes with its own work.
 */
import type { Registry } from "prom-client";
import type { HttpHandler, HttpRequest, HttpResponse } from "../grpc/index.js";
import { NONE } from "../raft/types.js";
import { ETCD_API_VERSION } from "./config.js";
import { debugVars } from "./debug_vars.js";
import type { EtcdServer } from "./etcdserver.js";
import { HEALTH_METHOD_NOT_ALLOWED, healthResponse } from "./health.js";
import { scrape } from "./metrics_handler.js";
import { Pprof, PPROF_PREFIX } from "./pprof.js";

export interface HttpRoutesOptions {
  /** --enable-pprof. */
  enablePprof: boolean;
}

/** What both ports serve: /metrics and /health. */
async function metricsAndHealth(s: EtcdServer, registry: Registry, req: HttpRequest, path: string): Promise<HttpResponse | undefined> {
  switch (path) {
    case "/metrics":
      return scrape(registry);
    case "/health":
      if (req.method !== "GET") return HEALTH_METHOD_NOT_ALLOWED;
      return healthResponse(await s.checkHealth());
    default:
      return undefined;
  }
}

export function httpRoutes(s: EtcdServer, registry: Registry, o: HttpRoutesOptions = { enablePprof: false }): HttpHandler {
  const pprof = o.enablePprof ? new Pprof() : undefined;
  return async (req) => {
    const path = req.url.split("?")[0]!;
    const common = await metricsAndHealth(s, registry, req, path);
    if (common !== undefined) return common;
    if (pprof !== undefined && path.startsWith(PPROF_PREFIX)) return pprof.serve(req.url, req.signal);
    switch (path) {
      case "/version":
        return json(200, { etcdserver: ETCD_API_VERSION, etcdcluster: ETCD_API_VERSION.replace(/\.\d+$/, ".0") });
      case "/debug/vars":
        return { status: 200, headers: { "content-type": "application/json; charset=utf-8" }, body: debugVars(s.raftStatus()) };
      case "/readyz":
      case "/livez": {
        const healthy = s.leader() !== NONE && s.alarms.list().length === 0;
        const reason = s.leader() === NONE ? "RAFT NO LEADER" : healthy ? "" : "ALARM ACTIVE";
        return json(healthy ? 200 : 503, { health: healthy ? "true" : "false", reason });
      }
      default:
        return undefined;
    }
  };
}

/** The --listen-metrics-urls handler: /metrics and /health only (etcd's metrics mux). */
export function metricsRoutes(s: EtcdServer, registry: Registry): HttpHandler {
  return (req) => metricsAndHealth(s, registry, req, req.url.split("?")[0]!);
}

function json(status: number, body: unknown) {
  return { status, headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
}
