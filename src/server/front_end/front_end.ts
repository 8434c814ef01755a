/**
 * A front-end process (`--experimental-front-ends=N`): forked by the member's core with the same
 * command line and FRONT_END_ENV set, it serves the client URLs on the listening handles node:cluster
 * shares with it, and forwards every call and plain HTTP request to the core over the pipe at
 * FRONT_END_PIPE_FD. It exits when the pipe closes, so a core killed with SIGKILL leaves no front
 * end serving.
 */
import net from "node:net";
import { GrpcServer } from "../../grpc/index.js";
import { loadMemberCodecs } from "../../pb/protos.js";
import { CLIENT_SERVICES, clientPortLimits } from "../client_services.js";
import { resolveCommandLine } from "../config.js";
import { createLogger } from "../logger.js";
import { clientTls, listenTarget } from "../tls/client_listeners.js";
import { isTlsUrl } from "../tls/url_check.js";
import { tuneV8 } from "../v8_tuning.js";
import { FrameKind } from "./frame.js";
import { CoreLink, rawServiceTable } from "./forwarder.js";

/** Set (to the front end's index) in a front end's environment: the process's role. */
export const FRONT_END_ENV = "ETCETERA_FRONT_END";
/** Set (to a JSON array of flags) when the core read a config file: the flags it stood for then. */
export const FRONT_END_FILE_ARGV_ENV = "ETCETERA_FRONT_END_FILE_ARGV";
/** The pipe to the core, in a front end's stdio. */
export const FRONT_END_PIPE_FD = 3;
/** How long a stopping front end lets its calls finish (the single-process member's shutdown grace). */
const SHUTDOWN_GRACE_MS = 1000;

export async function frontEndMain(index: number, argv: string[]): Promise<void> {
  tuneV8(process.env);
  // The core printed the command line's warnings and errors already; it parsed the same argv (or
  // read the config file whose flags it passed, as they were when it read them: the file may have changed since).
  const fileArgv = process.env[FRONT_END_FILE_ARGV_ENV];
  const quiet = { stdout: () => {}, stderr: () => {} };
  const resolved = fileArgv !== undefined ? resolveCommandLine(JSON.parse(fileArgv) as string[], {}, quiet) : resolveCommandLine(argv, process.env, quiet);
  if ("exitCode" in resolved) process.exit(resolved.exitCode);
  const config = resolved;
  const logger = createLogger({ level: config.logLevel, outputs: config.logOutputs, format: config.logger }).child({ frontEnd: index });
  process.on("uncaughtException", (err, origin) => {
    logger.fatal({ err, origin }, "uncaught exception in a front end; exiting");
    process.exit(1);
  });
  const servers: GrpcServer[] = [];
  let stopping = false;
  const stop = async (): Promise<void> => {
    if (stopping) return;
    stopping = true;
    await Promise.all(servers.map((g) => g.close(SHUTDOWN_GRACE_MS)));
    link.pipe.end();
    process.exit(0);
  };
  const link = new CoreLink(new net.Socket({ fd: FRONT_END_PIPE_FD, readable: true, writable: true }), {
    close: () => void stop(),
    lost: (error) => {
      if (!stopping) logger.warn({ err: error === undefined ? undefined : String(error) }, "front end lost its pipe to the member's core; exiting");
      process.exit(error === undefined ? 0 : 1);
    },
  });
  // Ctrl-C reaches the whole process group: the core stops its front ends itself, in order.
  process.on("SIGINT", () => {});
  process.on("SIGTERM", () => void stop());

  const tls = clientTls(config.tls.client, config.dataDir, config.listenClientUrls, config.listenMetricsUrls, logger);
  const table = rawServiceTable(loadMemberCodecs());
  for (const url of config.listenClientUrls) {
    // The same limits as the single-process member's client port (main.ts): they are enforced here, before a byte reaches the core.
    const g = new GrpcServer({
      codecs: table,
      ...clientPortLimits(config),
      tls: isTlsUrl(url) ? tls?.grpc : undefined,
      http: link.http,
    });
    for (const service of CLIENT_SERVICES) g.addService(service, link.forwardingHandlers(table, service));
    // node:cluster gives every front end the core's one listening handle per URL. A unix socket's
    // stale file was removed by the core before the first fork: removing it here would unlink the live one.
    const target = listenTarget(url);
    if (target.kind === "unix") await g.listenUnix(target.path);
    else await g.listen(target.port, target.host);
    servers.push(g);
  }
  link.pipe.send(FrameKind.Listening, index, []);
  logger.debug({ clientUrls: config.listenClientUrls, pid: process.pid }, "front end serving");
}
