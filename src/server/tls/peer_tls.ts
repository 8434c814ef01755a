/**
 * The peer transport's TLS from the --peer-* flags (etcd's PeerTLSInfo): the listener requires
 * and verifies member certificates with --peer-client-cert-auth, checks the CRL, the allowed CN
 * or host name, and that the certificate's SANs name the connecting address (etcd's checkSAN,
 * on unless --experimental-peer-skip-client-san-verification, which etcetera refuses); the dialer
 * presents the same certificate and verifies the remote member's against --peer-trusted-ca-file
 * (skipped with --peer-auto-tls, as etcd does for its self-signed certificates).
 */
import { lookup } from "node:dns/promises";
import { join } from "node:path";
import type { TLSSocket } from "node:tls";
import type { PeerTransportTls } from "../transport/tls_context.js";
import { urlHosts } from "./auto_tls.js";
import type { TlsInfo } from "./config.js";
import { allowedIdentityProblem, servingTls } from "./server_tls.js";

function plainIp(address: string | undefined): string {
  return (address ?? "").replace(/^::ffff:/, "");
}

/** etcd's checkCertSAN: a certificate with SANs must name the address it connects from. */
export async function sanProblem(socket: TLSSocket): Promise<string | undefined> {
  const x509 = socket.getPeerX509Certificate();
  if (x509 === undefined) return undefined;
  const entries = (x509.subjectAltName ?? "").split(", ").filter((e) => e !== "");
  const ips = entries.filter((e) => e.startsWith("IP Address:")).map((e) => e.slice("IP Address:".length));
  const names = entries.filter((e) => e.startsWith("DNS:")).map((e) => e.slice("DNS:".length));
  if (ips.length === 0 && names.length === 0) return undefined;
  const host = plainIp(socket.remoteAddress);
  if (ips.length > 0 && x509.checkIP(host) !== undefined) return undefined;
  if (names.length === 0) return `x509: certificate is valid for ${ips.join(", ")}, not ${host}`;
  for (const name of names) {
    try {
      const addresses = await lookup(name, { all: true });
      if (addresses.some((a) => plainIp(a.address) === host)) return undefined;
    } catch {
      // a name that does not resolve matches nothing
    }
  }
  return `tls: ${JSON.stringify(host)} does not match any of DNSNames [${names.map((n) => JSON.stringify(n)).join(" ")}]`;
}

/** Go's x509 words for OpenSSL's verification codes, so a refusal reads as etcd's does. */
const GO_X509_TEXT: Readonly<Record<string, string>> = {
  UNABLE_TO_VERIFY_LEAF_SIGNATURE: "x509: certificate signed by unknown authority",
  UNABLE_TO_GET_ISSUER_CERT: "x509: certificate signed by unknown authority",
  UNABLE_TO_GET_ISSUER_CERT_LOCALLY: "x509: certificate signed by unknown authority",
  SELF_SIGNED_CERT_IN_CHAIN: "x509: certificate signed by unknown authority",
  DEPTH_ZERO_SELF_SIGNED_CERT: "x509: certificate signed by unknown authority",
  CERT_HAS_EXPIRED: "x509: certificate has expired or is not yet valid",
  CERT_NOT_YET_VALID: "x509: certificate has expired or is not yet valid",
};

/** With --peer-client-cert-auth: etcd's refusal of a member without a certificate the trusted CAs verify (Go's texts). */
function unverifiedClientProblem(info: TlsInfo, socket: TLSSocket): string | undefined {
  if (!info.clientCertAuth || socket.authorized) return undefined;
  if (socket.getPeerX509Certificate() === undefined) return "tls: client didn't provide a certificate";
  const err = socket.authorizationError;
  const code = typeof err === "string" ? err : err instanceof Error ? ((err as NodeJS.ErrnoException).code ?? err.message) : "not verified";
  return `tls: failed to verify client certificate: ${GO_X509_TEXT[code] ?? code} (${code})`;
}

/** The transport's TLS, or undefined when the peer side has no certificate (no --peer-cert-file, no --peer-auto-tls). */
export function peerTransportTls(info: TlsInfo, dataDir: string, listenPeerUrls: readonly string[]): PeerTransportTls | undefined {
  if ((info.certFile === "" || info.keyFile === "") && !info.autoTls) return undefined;
  const serving = servingTls(info, join(dataDir, "fixtures", "peer"), urlHosts(listenPeerUrls));
  return {
    server: {
      key: serving.key,
      cert: serving.cert,
      ca: serving.ca,
      requestCert: serving.requestCert,
      // Verified in checkInbound instead, before a byte of the connection is read: the refusal is then logged
      // with the member's address and the reason (a TLS 1.3 handshake failure reaches the server only as "socket hang up").
      rejectUnauthorized: false,
      ciphers: serving.ciphers,
      minVersion: "TLSv1.2",
    },
    client: {
      key: serving.key,
      cert: serving.cert,
      ca: serving.ca,
      rejectUnauthorized: !serving.selfSigned,
      ciphers: serving.ciphers,
      minVersion: "TLSv1.2",
    },
    checkInbound: async (socket) => {
      const unverified = unverifiedClientProblem(info, socket);
      if (unverified !== undefined) return unverified;
      const refused = serving.check(socket);
      if (refused !== undefined || !info.clientCertAuth) return refused;
      return sanProblem(socket);
    },
    checkOutbound: (socket) => (socket.authorized ? allowedIdentityProblem(info, socket) : undefined),
  };
}
