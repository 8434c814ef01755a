/**
 * /metrics: the registry in Prometheus' text format, instrumented as client_golang's
 * promhttp.Handler() instruments itself (promhttp_metric_handler_requests_total{code},
 * promhttp_metric_handler_requests_in_flight), shared by every port serving the registry.
 */
import { Counter, Gauge, type Registry } from "prom-client";
import type { HttpResponse } from "../grpc/index.js";

interface HandlerMetrics {
  requests: Counter<"code">;
  inFlight: Gauge;
}

const byRegistry = new WeakMap<Registry, HandlerMetrics>();

function handlerMetrics(registry: Registry): HandlerMetrics {
  let m = byRegistry.get(registry);
  if (m === undefined) {
    const registers = [registry];
    const requests = new Counter({ name: "promhttp_metric_handler_requests_total", help: "Total number of scrapes by HTTP status code.", labelNames: ["code"], registers });
    // client_golang starts these three codes at 0.
    for (const code of ["200", "500", "503"]) requests.inc({ code }, 0);
    m = { requests, inFlight: new Gauge({ name: "promhttp_metric_handler_requests_in_flight", help: "Current number of scrapes being served.", registers }) };
    byRegistry.set(registry, m);
  }
  return m;
}

export async function scrape(registry: Registry): Promise<HttpResponse> {
  const m = handlerMetrics(registry);
  m.inFlight.inc();
  try {
    const body = await registry.metrics();
    m.requests.inc({ code: "200" });
    return { status: 200, headers: { "content-type": registry.contentType }, body };
  } catch (err) {
    m.requests.inc({ code: "500" });
    return { status: 500, headers: { "content-type": "text/plain; charset=utf-8" }, body: `An error has occurred while serving metrics:\n\n${String(err)}\n` };
  } finally {
    m.inFlight.dec();
  }
}
