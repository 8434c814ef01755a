/**
 * The plain-HTTP routes of the client and metrics ports that etcd users script against:
 * /metrics (Prometheus text), /health, /version. The JSON gateway comes with its own work.
 */
import type { Registry } from "prom-client";
import type { HttpHandler } from "../grpc/index.js";
import { NONE } from "../raft/types.js";
import { ETCD_API_VERSION } from "./config.js";
import type { EtcdServer } from "./etcdserver.js";

export function httpRoutes(s: EtcdServer, registry: Registry): HttpHandler {
  return async (req) => {
    const path = req.url.split("?")[0];
    switch (path) {
      case "/metrics":
        return { status: 200, headers: { "content-type": registry.contentType }, body: await registry.metrics() };
      case "/version":
        return json(200, { etcdserver: ETCD_API_VERSION, etcdcluster: ETCD_API_VERSION.replace(/\.\d+$/, ".0") });
      case "/health":
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

function json(status: number, body: unknown) {
  return { status, headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
}
