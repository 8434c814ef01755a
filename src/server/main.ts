/**
 * `node dist/server.js [etcd flags]`: parse the flags, start the member, serve the client API on
 * every --listen-client-urls, and stop cleanly on SIGTERM/SIGINT.
 */
import { rmSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import { collectDefaultMetrics, Registry } from "prom-client";
import { GrpcServer, type MemberServices } from "../grpc/index.js";
import { clientHttp } from "../gateway/index.js";
import { serveHttp1 } from "../grpc/http.js";
import { registerMvccMetrics } from "../mvcc/metrics.js";
import { Quota } from "./api/quota.js";
import { addClientServices, clientPortLimits } from "./client_services.js";
import { resolveCommandLine, type ServerConfig } from "./config.js";
import { EtcdServer } from "./etcdserver.js";
import { grpcMetrics } from "./grpc_metrics.js";
import { httpRoutes, metricsRoutes } from "./http_routes.js";
import { registerProcessMetrics } from "./process_metrics.js";
import { createLogger, type Logger } from "./logger.js";
import { formatId } from "./member.js";
import { loadMemberCodecs } from "../pb/protos.js";
import { tuneV8 } from "./v8_tuning.js";
import { commitHoldMsFromEnv } from "./commit_hold.js";
import { http2EngineFromEnv } from "../grpc/server.js";
import { FrontEnds } from "./front_end/front_ends.js";
import { warmUp, warmupEnabled } from "./warmup.js";
import { releaseYoungGenerationWhenQuiet } from "./young_generation.js";
import { clientTls, httpsOptions, listenOn, listenTarget } from "./tls/client_listeners.js";
import { isTlsUrl } from "./tls/url_check.js";
import { TEST_BUG_ENV, testBugsFromEnv, type TestBug } from "./test_bugs.js";

export async function main(argv: string[]): Promise<void> {
  const heap = tuneV8(process.env);
  const resolved = resolveCommandLine(argv, process.env, {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
  });
  if ("exitCode" in resolved) process.exit(resolved.exitCode);
  const config: ServerConfig = resolved;
  const logger = createLogger({ level: config.logLevel, outputs: config.logOutputs, format: config.logger });
  // etcd 3.4 prints these to stderr before its first log line.
  for (const notice of config.loggingNotices) process.stderr.write(`${notice}\n`);
  // A bug escaping to the event loop still kills the member as Node would (exit 1), but
  // its stack also lands in --log-outputs: Node's own report goes to stderr only.
  process.on("uncaughtException", (err, origin) => {
    logger.fatal({ err, origin }, "uncaught exception; exiting");
    process.exit(1);
  });
  if (config.configFile !== null) logger.info({ path: config.configFile }, "loaded server configuration, other configuration command line flags and environment variables will be ignored if provided");
  for (const w of config.warnings) logger.warn(w);
  // The member's own knobs are refused before anything starts (fail closed), each naming its variable.
  const refuse = (message: string): void => {
    logger.fatal(message);
    process.exitCode = 1;
    setImmediate(() => process.exit(1));
  };
  if ("error" in heap) return refuse(heap.error);
  logger.debug({ heapGrowingPercent: heap.percent }, "heap tuning");
  // A bad ETCETERA_HTTP2 names no engine.
  try {
    http2EngineFromEnv(process.env);
  } catch (err) {
    return refuse((err as Error).message);
  }
  const hold = commitHoldMsFromEnv(process.env);
  if (typeof hold !== "number") return refuse(hold.error);
  const warmup = warmupEnabled(process.env);
  if (typeof warmup !== "boolean") return refuse(warmup.error);
  const testBugs = testBugsFromEnv(process.env);
  if ("error" in testBugs) return refuse(testBugs.error);
  for (const bug of testBugs.bugs) {
    logger.error({ testBug: bug }, `TEST-ONLY BUG PLANTED (${TEST_BUG_ENV}=${bug}): this member is deliberately broken and must never hold real data`);
  }
  try {
    await serve(config, logger, testBugs.bugs, warmup);
  } catch (err) {
    logger.fatal({ err: String(err) }, "failed to start");
    process.exitCode = 1;
    setImmediate(() => process.exit(1));
  }
}

async function serve(config: ServerConfig, logger: Logger, testBugs: ReadonlySet<TestBug>, warmup: boolean): Promise<void> {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  registerProcessMetrics(registry);
  logger.info({ name: config.name, dataDir: config.dataDir, initialCluster: config.initialClusterText }, "starting etcetera");
  const fatal = (err: Error) => {
    logger.fatal({ err: String(err) }, "member stopped on a fatal error");
    process.exit(1);
  };
  // TLS material first: a bad file or auto-TLS failure stops the start-up before the member runs.
  const tlsForClients = clientTls(config.tls.client, config.dataDir, config.listenClientUrls, config.listenMetricsUrls, logger);
  let stop: (signal: string) => Promise<void> = async () => process.exit(0);
  // A removed member exits 0 once stopped, as etcd's process does.
  const onRemoved = (reason: string) => void stop(reason);
  const server = await EtcdServer.start({ config, logger, registry, onFatal: fatal, testBugs, onRemoved });
  // While raft elects or catches up (the warm-up yields to it every few ms), and done before the
  // client port opens, so the first requests run compiled code (src/server/warmup.ts).
  const warm = warmup ? warmUpHotPaths(logger) : Promise.resolve();
  await server.checkInitialHashKV();
  // Gauges read at scrape time: server.kv and server.watchable are the same objects for the member's life.
  registerMvccMetrics(registry, server.kv, server.watchable);
  logger.info({ memberId: formatId(server.memberId), clusterId: formatId(server.clusterId) }, "member started");

  const quota = new Quota(server.v3);
  const grpcServers: GrpcServer<MemberServices>[] = [];
  const routes = httpRoutes(server, registry, { enablePprof: config.enablePprof });
  // One observer for every client URL: the gRPC families count the member's calls, not a listener's.
  const observer = grpcMetrics(registry, { level: config.metricsLevel });
  // The warm-up is done before a client port opens (here or in the front ends).
  await warm;
  let frontEnds: FrontEnds | undefined;
  if (config.frontEnds > 0) {
    frontEnds = await startFrontEnds(config, logger, server, quota, routes, observer);
  } else {
    for (const url of config.listenClientUrls) {
      // The member's codecs decode to the camelCase messages of src/pb/member-types.ts; addService checks each service against them.
      const g = new GrpcServer<MemberServices>({
        codecs: loadMemberCodecs(),
        ...clientPortLimits(config),
        observer,
        tls: isTlsUrl(url) ? tlsForClients?.grpc : undefined,
      });
      addClientServices(g, server, quota);
      // After the services: the JSON gateway dispatches to the handlers registered above.
      g.setHttpHandler(clientHttp({ methods: g, routes, cors: config.cors, hostWhitelist: config.hostWhitelist, gateway: config.enableGrpcGateway }));
      await listenOn(g, url);
      grpcServers.push(g);
    }
  }
  const metricsServers = config.listenMetricsUrls.map((url) => {
    const target = listenTarget(url);
    const handler = metricsRoutes(server, registry);
    const serve1 = (req: IncomingMessage, res: ServerResponse) => serveHttp1(req, res, handler);
    // An https:// metrics URL is served with the client TLS, as etcd does.
    const srv = isTlsUrl(url) && tlsForClients !== undefined ? createHttpsServer(httpsOptions(tlsForClients.serving), serve1) : createServer(serve1);
    if (target.kind === "unix") srv.listen(target.path);
    else srv.listen(target.port, target.host);
    return srv;
  });

  // The young generation the warm-up and every burst of load grew is given back once the member is quiet.
  const youngGeneration = releaseYoungGenerationWhenQuiet((r) =>
    logger.debug({ newSpaceBeforeBytes: r.beforeBytes, newSpaceAfterBytes: r.afterBytes, ms: Math.round(r.ms * 10) / 10 }, "scavenged a quiet member's young generation"),
  );
  let stopping = false;
  stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    youngGeneration.stop();
    logger.info({ signal }, "received signal; shutting down");
    await Promise.all(grpcServers.map((g) => g.close(1000)));
    await frontEnds?.stop();
    for (const m of metricsServers) m.close();
    await server.stop();
    logger.info("stopped");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));

  await server.ready;
  logger.info({ clientUrls: config.listenClientUrls }, "ready to serve client requests");
}

/**
 * --experimental-front-ends=N: the client URLs are served by N front-end processes (front_end/);
 * this process keeps a GrpcServer that never listens, with the same services, to run the calls
 * they forward, and the same HTTP handler for the requests that are not gRPC.
 */
async function startFrontEnds(
  config: ServerConfig,
  logger: Logger,
  server: EtcdServer,
  quota: Quota,
  routes: ReturnType<typeof httpRoutes>,
  observer: ReturnType<typeof grpcMetrics>,
): Promise<FrontEnds> {
  const dispatch = new GrpcServer<MemberServices>({ codecs: loadMemberCodecs(), observer });
  addClientServices(dispatch, server, quota);
  const http = clientHttp({ methods: dispatch, routes, cors: config.cors, hostWhitelist: config.hostWhitelist, gateway: config.enableGrpcGateway });
  // etcd's NewUnixListener removes a stale socket file; the front ends share one socket, so it is removed once, here.
  for (const url of config.listenClientUrls) {
    const target = listenTarget(url);
    if (target.kind === "unix") rmSync(target.path, { force: true });
  }
  return FrontEnds.start({
    count: config.frontEnds,
    logger,
    method: (path) => dispatch.method(path),
    http,
    observer,
    maxSendMessageBytes: dispatch.maxSendMessageBytes,
    fileArgv: config.fileArgv,
  });
}

/** Runs the warm-up and logs how long it took; a failure is logged and the member serves cold. */
async function warmUpHotPaths(logger: Logger): Promise<void> {
  try {
    const r = await warmUp();
    const c = r.counts;
    logger.info({ rounds: r.rounds, primerPuts: c.primerPuts, memberPuts: c.memberPuts, memberSinglePuts: c.memberSinglePuts, memberTxns: c.memberTxns, memberRanges: c.memberRanges, durationMs: Math.round(r.durationMs), budgetExceeded: r.budgetExceeded }, "warmed up the request paths");
    if (r.memberSkipped !== undefined) logger.warn({ reason: r.memberSkipped }, "warm-up ran without its scratch cluster");
  } catch (err) {
    logger.warn({ err: String(err) }, "warm-up failed; serving without it");
  }
}
