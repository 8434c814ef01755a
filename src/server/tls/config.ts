/**
 * The TLS part of the member's configuration (etcd's transport.TLSInfo, one for clients and one for
 * peers), read from the security flags. Pure: files are read when the listeners are made
 * (listener.ts), so a bad file is a start-up error naming it.
 */
import { parseGoBool } from "../flags.js";
import { opensslCiphers } from "./cipher_suites.js";

/** One side's TLS settings (etcd's TLSInfo). Paths are as given; "" is unset. */
export interface TlsInfo {
  readonly certFile: string;
  readonly keyFile: string;
  readonly trustedCaFile: string;
  /** Ask for a client certificate and refuse a connection without a valid one. */
  readonly clientCertAuth: boolean;
  readonly crlFile: string;
  /** A verified client certificate must also be valid for this host name (--*-cert-allowed-hostname). */
  readonly allowedHostname: string;
  /** A verified client certificate's CN must be this (--peer-cert-allowed-cn; "" on the client side). */
  readonly allowedCn: string;
  /** Generate a self-signed certificate when no cert/key files are given (--auto-tls, --peer-auto-tls). */
  readonly autoTls: boolean;
  /** node:tls `ciphers` from --cipher-suites (shared by both sides); undefined for OpenSSL's default. */
  readonly ciphers: string | undefined;
}

export interface TlsConfig {
  readonly client: TlsInfo;
  readonly peer: TlsInfo;
}

/** True when the side has a key and certificate to serve with: files, or auto TLS. */
export function hasServingCert(info: TlsInfo): boolean {
  return (info.certFile !== "" && info.keyFile !== "") || info.autoTls;
}

/** Reads both TlsInfos; throws etcd's texts for what it refuses at start (an unknown cipher suite). */
export function tlsConfigFromFlags(raw: (name: string) => string): TlsConfig {
  const ciphers = opensslCiphers(raw("cipher-suites"));
  const client: TlsInfo = {
    certFile: raw("cert-file"),
    keyFile: raw("key-file"),
    trustedCaFile: raw("trusted-ca-file"),
    clientCertAuth: parseGoBool(raw("client-cert-auth")),
    crlFile: raw("client-crl-file"),
    allowedHostname: raw("client-cert-allowed-hostname"),
    allowedCn: "",
    autoTls: parseGoBool(raw("auto-tls")),
    ciphers,
  };
  const peer: TlsInfo = {
    certFile: raw("peer-cert-file"),
    keyFile: raw("peer-key-file"),
    trustedCaFile: raw("peer-trusted-ca-file"),
    clientCertAuth: parseGoBool(raw("peer-client-cert-auth")),
    crlFile: raw("peer-crl-file"),
    allowedHostname: raw("peer-cert-allowed-hostname"),
    allowedCn: raw("peer-cert-allowed-cn"),
    autoTls: parseGoBool(raw("peer-auto-tls")),
    ciphers,
  };
  if (peer.allowedCn !== "" && peer.allowedHostname !== "") {
    throw new Error(`AllowedCN and AllowedHostname are mutually exclusive (cn=${JSON.stringify(peer.allowedCn)}, hostname=${JSON.stringify(peer.allowedHostname)})`);
  }
  for (const [info, prefix] of [
    [client, ""],
    [peer, "peer-"],
  ] as const) {
    if ((info.certFile === "") !== (info.keyFile === "")) {
      // etcd's TLSInfo.Empty is "both unset": one without the other fails in tls.LoadX509KeyPair.
      throw new Error(`--${prefix}cert-file and --${prefix}key-file must be given together`);
    }
  }
  return { client, peer };
}

/**
 * etcetera's one refusal beyond etcd: TLS asked for (certificate files, client cert auth, auto
 * TLS) while no listen URL of that side uses TLS. etcd warns ("scheme is HTTP while key and cert
 * files are present; ignoring ...") and serves plaintext to anyone, which is how a compose file
 * setting ETCD_CERT_FILE ends up unprotected; etcetera does not start with less than was asked for.
 */
export function tlsAskedWithoutTlsUrl(info: TlsInfo, side: "client" | "peer", listenUrls: readonly string[]): string | undefined {
  const prefix = side === "client" ? "" : "peer-";
  const asked = [
    info.certFile !== "" ? `--${prefix}cert-file` : "",
    info.clientCertAuth ? `--${prefix}client-cert-auth` : "",
    info.autoTls ? `--${prefix}auto-tls` : "",
  ].filter((s) => s !== "");
  if (asked.length === 0 || listenUrls.some((u) => u.startsWith("https://") || u.startsWith("unixs://"))) return undefined;
  const flag = side === "client" ? "--listen-client-urls" : "--listen-peer-urls";
  return `${asked.join(", ")} given but no ${flag} URL is https:// or unixs:// (${listenUrls.join(",")}); refusing to serve plaintext when TLS was asked for`;
}
