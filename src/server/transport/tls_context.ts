/**
 * What the transport needs for https:// peer URLs (built from --peer-* flags by
 * src/server/tls/peer_tls.ts): the listener's and the dialer's node:tls options, and the checks
 * after each handshake. A connection a check refuses is closed before its Hello is read, so a
 * member whose certificate is refused gets no data.
 */
import type { ConnectionOptions, TlsOptions, TLSSocket } from "node:tls";

export interface PeerTransportTls {
  /** Options of an https:// peer listener (key, cert, ca, requestCert, ciphers, minVersion). */
  readonly server: TlsOptions;
  /** Options for dialing an https:// peer (our certificate as the client's, ca, rejectUnauthorized). */
  readonly client: ConnectionOptions;
  /** After an inbound handshake: why to refuse the connecting member (CRL, allowed CN/host name, SAN vs address), or undefined. */
  checkInbound(socket: TLSSocket): Promise<string | undefined>;
  /** After a dial's handshake: why to refuse the dialed member's certificate (allowed CN/host name), or undefined. */
  checkOutbound(socket: TLSSocket): string | undefined;
}
