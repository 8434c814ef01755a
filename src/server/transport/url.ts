/** Peer URL → TCP address. The peer transport speaks raw TCP (http://) or TLS (https://) on the peer URL's host:port. */

export interface TcpAddress {
  host: string;
  port: number;
  /** https://: the connection is TLS (the transport's peer TLS settings, tls_context.ts). */
  secure?: boolean;
}

/** Parses `http://host:port` or `https://host:port` (IPv6 in brackets). */
export function peerUrlToAddress(url: string): TcpAddress {
  const m = /^(https?):\/\/(\[[0-9a-fA-F:.]+\]|[^:/[\]]+):([0-9]{1,5})$/.exec(url);
  if (m === null) throw new Error(`unsupported peer URL "${url}" (expected http://host:port or https://host:port)`);
  const port = Number(m[3]);
  if (port > 65535) throw new Error(`invalid port in peer URL "${url}"`);
  const host = m[2]!.startsWith("[") ? m[2]!.slice(1, -1) : m[2]!;
  return m[1] === "https" ? { host, port, secure: true } : { host, port };
}
