/**
 * etcd's start-up refusals of a TLS URL (https://, unixs://) without the key and certificate to
 * serve it, with etcd's own texts: the peer and metrics listeners fail in pkg/transport
 * ("cannot listen on TLS for ...: KeyFile and CertFile are not presented"), the client listener
 * in embed ("TLS key/cert (--cert-file, --key-file) must be provided for client url ... with
 * HTTPS scheme"). Peer listeners are checked first, as etcd configures them first.
 */

export function isTlsUrl(url: string): boolean {
  return url.startsWith("https://") || url.startsWith("unixs://");
}

/** `host:port` of a URL as Go's url.URL.Host prints it. */
function hostOf(url: string): string {
  return url.slice(url.indexOf("://") + 3);
}

export interface TlsUrlCheck {
  readonly listenPeerUrls: readonly string[];
  readonly listenClientUrls: readonly string[];
  readonly listenMetricsUrls: readonly string[];
  /** A key and certificate for the peer listener (files or --peer-auto-tls). */
  readonly peerHasCert: boolean;
  /** A key and certificate for the client and metrics listeners (files or --auto-tls). */
  readonly clientHasCert: boolean;
}

/** etcd's error text for the first TLS URL that has no certificate to serve it, or undefined. */
export function tlsUrlWithoutCert(c: TlsUrlCheck): string | undefined {
  const notPresented = (url: string) => `cannot listen on TLS for ${hostOf(url)}: KeyFile and CertFile are not presented`;
  if (!c.peerHasCert) {
    const url = c.listenPeerUrls.find(isTlsUrl);
    if (url !== undefined) return notPresented(url);
  }
  if (!c.clientHasCert) {
    const url = c.listenClientUrls.find(isTlsUrl);
    if (url !== undefined) return `TLS key/cert (--cert-file, --key-file) must be provided for client url ${url} with HTTPS scheme`;
    const metrics = c.listenMetricsUrls.find(isTlsUrl);
    if (metrics !== undefined) return notPresented(metrics);
  }
  return undefined;
}
