/**
 * Who a TLS client proved to be: the CN of its verified certificate (etcd's AuthInfoFromTLS, used
 * as the user name when --client-cert-auth and auth are on). Only a certificate that passed
 * verification against the trusted CAs counts; an unverified one, or none, gives undefined.
 *
 * The connection's socket is tagged once after the handshake; a call reads the tag through its
 * HTTP/2 session's socket (node:http2's proxy forwards property reads to the socket it was given,
 * which is the TLS socket or the rewriting stream around it, tagged alike).
 */
import type { Duplex } from "node:stream";
import type { TLSSocket } from "node:tls";
import type { CallContext } from "./handler.js";

export interface ClientIdentity {
  /** Subject CN of the verified client certificate ("" certificates without a CN give no identity). */
  readonly commonName: string;
}

const kClientIdentity = Symbol("grpc.clientIdentity");
type Tagged = { [kClientIdentity]?: ClientIdentity };

/** Records `tlsSocket`'s verified identity on `target` (the socket node:http2 will be given). */
export function tagClientIdentity(target: Duplex, tlsSocket: TLSSocket): void {
  if (!tlsSocket.authorized) return;
  const cn = tlsSocket.getPeerCertificate().subject?.CN;
  const commonName = Array.isArray(cn) ? cn[0] : cn;
  if (typeof commonName !== "string" || commonName === "") return;
  (target as Tagged)[kClientIdentity] = { commonName };
}

/** The identity recorded on a connection's socket (as seen through a session's `socket`). */
export function clientIdentityOfSocket(socket: object | undefined): ClientIdentity | undefined {
  return socket === undefined ? undefined : (socket as Tagged)[kClientIdentity];
}

/**
 * The accessor for services (auth): the CN of the verified client certificate of the call's
 * connection, or undefined (plaintext, no certificate, or one not verified).
 */
export function verifiedClientCommonName(ctx: CallContext): string | undefined {
  return ctx.clientCertCommonName;
}
