/**
 * How a follower reaches the leader's https:// client URL for the requests it forwards
 * (leader_client.ts): the client-side CA bundle (--trusted-ca-file) to verify the leader, and this
 * member's own certificate (--cert-file/--key-file, or the auto-TLS pair made at start) as its
 * client certificate, for a leader with --client-cert-auth. With --auto-tls the leader's
 * self-signed certificate cannot be verified and is not (as etcd's self-signed clients do).
 * etcd forwards these requests over its peer port instead; etcetera uses the client port.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import type { TlsInfo } from "./config.js";

export interface LeaderTls {
  readonly rootCerts: Buffer | null;
  readonly key: Buffer | null;
  readonly cert: Buffer | null;
  readonly rejectUnauthorized: boolean;
}

export function leaderClientTls(info: TlsInfo, dataDir: string): LeaderTls | undefined {
  let certFile = info.certFile;
  let keyFile = info.keyFile;
  const selfSigned = certFile === "" && info.autoTls;
  if (selfSigned) {
    certFile = join(dataDir, "fixtures", "client", "cert.pem");
    keyFile = join(dataDir, "fixtures", "client", "key.pem");
  }
  if (certFile === "" || keyFile === "" || !existsSync(certFile) || !existsSync(keyFile)) return undefined;
  return {
    rootCerts: info.trustedCaFile === "" ? null : readFileSync(info.trustedCaFile),
    key: readFileSync(keyFile),
    cert: readFileSync(certFile),
    rejectUnauthorized: !selfSigned,
  };
}
