/** Peer URL → TCP address. The peer transport speaks raw TCP on the peer URL's host:port. */

export interface TcpAddress {
  host: string;
  port: number;
}

/** Parses `http://host:port` (IPv6 in brackets). Only http: etcetera has no peer TLS. */
export function peerUrlToAddress(url: string): TcpAddress {
  const m = /^http:\/\/(\[[0-9a-fA-F:.]+\]|[^:/[\]]+):([0-9]{1,5})$/.exec(url);
  if (m === null) throw new Error(`unsupported peer URL "${url}" (expected http://host:port)`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`invalid port in peer URL "${url}"`);
  const host = m[1]!.startsWith("[") ? m[1]!.slice(1, -1) : m[1]!;
  return { host, port };
}
