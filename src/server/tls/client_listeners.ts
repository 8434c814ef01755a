/**
 * The client port's listeners from --listen-client-urls: http:// and unix:// serve plaintext,
 * https:// and unixs:// serve TLS (gRPC and HTTP on one port, ALPN h2 and http/1.1) with the
 * client TlsInfo. The TLS material is made once, before the member starts, so a bad file or an
 * auto-TLS failure stops the start-up with its reason.
 */
import { join } from "node:path";
import type { ServerOptions as HttpsServerOptions } from "node:https";
import type { Logger } from "pino";
import type { GrpcServer, TlsOptions } from "../../grpc/index.js";
import { urlHosts } from "./auto_tls.js";
import type { TlsInfo } from "./config.js";
import { servingTls, type ServingTls } from "./server_tls.js";
import { isTlsUrl } from "./url_check.js";

export type ListenTarget = { readonly kind: "tcp"; readonly host: string; readonly port: number } | { readonly kind: "unix"; readonly path: string };

/** Where a client (or metrics) URL listens: host:port, or for unix(s):// the socket path `host:port` as etcd names it. */
export function listenTarget(url: string): ListenTarget {
  const u = new URL(url);
  if (u.protocol === "unix:" || u.protocol === "unixs:") return { kind: "unix", path: url.slice(url.indexOf("://") + 3) };
  const host = u.hostname.replace(/^\[|\]$/g, "");
  const defaultPort = u.protocol === "https:" ? 443 : 80;
  return { kind: "tcp", host: host === "localhost" ? "127.0.0.1" : host, port: Number(u.port || defaultPort) };
}

export async function listenOn(g: Pick<GrpcServer, "listen" | "listenUnix">, url: string): Promise<void> {
  const target = listenTarget(url);
  if (target.kind === "unix") {
    const { rmSync } = await import("node:fs");
    rmSync(target.path, { force: true }); // etcd's NewUnixListener removes a stale socket file
    await g.listenUnix(target.path);
  } else {
    await g.listen(target.port, target.host);
  }
}

export interface ClientTls {
  readonly serving: ServingTls;
  /** What the gRPC server of a TLS client URL is given. */
  readonly grpc: TlsOptions;
}

/**
 * The client TLS for `listenClientUrls`, or undefined when none is a TLS URL (etcd's warnings
 * when certificates or --client-cert-auth are given for plaintext URLs only).
 */
export function clientTls(
  info: TlsInfo,
  dataDir: string,
  listenClientUrls: readonly string[],
  listenMetricsUrls: readonly string[],
  logger: Logger,
): ClientTls | undefined {
  for (const url of listenClientUrls.filter((u) => !isTlsUrl(u))) {
    if (info.certFile !== "" || info.keyFile !== "") logger.warn({ "client-url": url }, "scheme is HTTP while key and cert files are present; ignoring key and cert files");
    if (info.clientCertAuth) logger.warn({ "client-url": url }, "scheme is HTTP while --client-cert-auth is enabled; ignoring client cert auth for this URL");
  }
  if (![...listenClientUrls, ...listenMetricsUrls].some(isTlsUrl)) return undefined;
  const serving = servingTls(info, join(dataDir, "fixtures", "client"), urlHosts(listenClientUrls));
  logger.info(
    { "cert-file": serving.certFile, "key-file": serving.keyFile, "trusted-ca-file": info.trustedCaFile, "client-cert-auth": info.clientCertAuth, "crl-file": info.crlFile, "auto-tls": serving.selfSigned },
    "starting with client TLS",
  );
  return {
    serving,
    grpc: {
      key: serving.key,
      cert: serving.cert,
      ca: serving.ca,
      requestCert: serving.requestCert,
      ciphers: serving.ciphers,
      check: (socket) => serving.check(socket),
      onRefused: (remote, reason) => logger.warn({ "remote-addr": remote, error: reason }, "rejected connection"),
    },
  };
}

/** node:https options for an https:// metrics URL (no post-handshake checks: it serves only /metrics). */
export function httpsOptions(serving: ServingTls): HttpsServerOptions {
  return {
    key: serving.key,
    cert: serving.cert,
    ca: serving.ca,
    requestCert: serving.requestCert,
    rejectUnauthorized: serving.requestCert,
    ciphers: serving.ciphers,
    minVersion: "TLSv1.2",
  };
}
