/**
 * A TlsInfo made into what a TLS listener needs (etcd's TLSInfo.ServerConfig and its tlsListener
 * checks): the key, certificate and CA bundle read from their files (or the auto-TLS pair
 * generated), whether to require client certificates, and the checks made after the handshake
 * (CRL, allowed CN, allowed host name), with etcd's refusal texts.
 */
import { readFileSync } from "node:fs";
import { isIP } from "node:net";
import type { TLSSocket } from "node:tls";
import { selfCert } from "./auto_tls.js";
import type { TlsInfo } from "./config.js";
import { checkCrl, revokedSerials } from "./crl.js";

export interface ServingTls {
  readonly key: Buffer;
  readonly cert: Buffer;
  readonly ca: Buffer | undefined;
  readonly requestCert: boolean;
  readonly ciphers: string | undefined;
  /** The files served (the generated ones with auto TLS), for the start-up log. */
  readonly certFile: string;
  readonly keyFile: string;
  /** True when an auto-TLS certificate is served (dialing peers then skip verification, as etcd). */
  readonly selfSigned: boolean;
  /** After the handshake: the reason to refuse the connection, or undefined. */
  check(socket: TLSSocket): string | undefined;
}

function readNamed(file: string, what: string): Buffer {
  try {
    return readFileSync(file);
  } catch (e) {
    throw new Error(`${what}: ${(e as Error).message}`);
  }
}

/**
 * etcd's VerifyPeerCertificate for --*-cert-allowed-cn / --*-cert-allowed-hostname: the verified
 * leaf must carry the CN, or be valid for the host name (SANs only, as Go checks them).
 */
export function allowedIdentityProblem(info: TlsInfo, socket: TLSSocket): string | undefined {
  if (info.allowedCn === "" && info.allowedHostname === "") return undefined;
  const x509 = socket.getPeerX509Certificate();
  if (x509 === undefined) return "client certificate authentication failed";
  if (info.allowedCn !== "") {
    const cn = socket.getPeerCertificate().subject?.CN;
    const cns = Array.isArray(cn) ? cn : [cn];
    if (!cns.includes(info.allowedCn)) return "client certificate authentication failed";
  }
  if (info.allowedHostname !== "") {
    const h = info.allowedHostname;
    const ok = isIP(h) !== 0 ? x509.checkIP(h) !== undefined : x509.checkHost(h, { subject: "never" }) !== undefined;
    if (!ok) return "client certificate authentication failed";
  }
  return undefined;
}

/**
 * Reads the files of `info` (or makes the auto-TLS pair in `selfCertDir` for `hosts`). Throws a
 * start-up error naming the file that cannot be read.
 */
export function servingTls(info: TlsInfo, selfCertDir: string, hosts: readonly string[]): ServingTls {
  if ((info.certFile === "" || info.keyFile === "") && !info.autoTls) throw new Error("KeyFile and CertFile are not presented");
  let certFile = info.certFile;
  let keyFile = info.keyFile;
  let selfSigned = false;
  if (certFile === "" || keyFile === "") {
    const made = selfCert(selfCertDir, hosts);
    certFile = made.certFile;
    keyFile = made.keyFile;
    selfSigned = true;
  }
  const ca = info.trustedCaFile === "" ? undefined : readNamed(info.trustedCaFile, "trusted CA file");
  // etcd reads the CRL at each connection; a CRL that cannot be read at start is an error now, not a refused client later.
  if (info.crlFile !== "") revokedSerials(readNamed(info.crlFile, "CRL file"));
  return {
    key: readNamed(keyFile, "key file"),
    cert: readNamed(certFile, "cert file"),
    ca,
    requestCert: info.clientCertAuth,
    ciphers: info.ciphers,
    certFile,
    keyFile,
    selfSigned,
    check: (socket) => {
      if (!info.clientCertAuth) return undefined; // no certificate was asked for: nothing to check
      const peer = socket.getPeerCertificate(true);
      if (info.crlFile !== "" && peer.serialNumber !== undefined) {
        let revoked: string | undefined;
        try {
          revoked = checkCrl(info.crlFile, peer);
        } catch (e) {
          return `cannot check the CRL ${info.crlFile}: ${(e as Error).message}`; // fail closed
        }
        if (revoked !== undefined) return revoked;
      }
      return allowedIdentityProblem(info, socket);
    },
  };
}
