/**
 * --cipher-suites: etcd's tlsutil.GetCipherSuite names (Go's tls.CipherSuites() and
 * InsecureCipherSuites(), plus the two CHACHA20 names without "_SHA256") mapped to the OpenSSL
 * names node:tls takes. An unknown name is refused with etcd's text.
 *
 * As in Go, the list restricts TLS 1.2; TLS 1.3 keeps all its suites unless TLS 1.3 names are
 * listed (Go ignores those for 1.3, OpenSSL honours them: listing them restricts 1.3 too). A
 * suite the local OpenSSL build lacks (RC4) fails when the listener is made.
 */

const GO_TO_OPENSSL: Readonly<Record<string, string>> = {
  TLS_RSA_WITH_RC4_128_SHA: "RC4-SHA",
  TLS_RSA_WITH_3DES_EDE_CBC_SHA: "DES-CBC3-SHA",
  TLS_RSA_WITH_AES_128_CBC_SHA: "AES128-SHA",
  TLS_RSA_WITH_AES_256_CBC_SHA: "AES256-SHA",
  TLS_RSA_WITH_AES_128_CBC_SHA256: "AES128-SHA256",
  TLS_RSA_WITH_AES_128_GCM_SHA256: "AES128-GCM-SHA256",
  TLS_RSA_WITH_AES_256_GCM_SHA384: "AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_RC4_128_SHA: "ECDHE-ECDSA-RC4-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA: "ECDHE-ECDSA-AES128-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA: "ECDHE-ECDSA-AES256-SHA",
  TLS_ECDHE_RSA_WITH_RC4_128_SHA: "ECDHE-RSA-RC4-SHA",
  TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA: "ECDHE-RSA-DES-CBC3-SHA",
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA: "ECDHE-RSA-AES128-SHA",
  TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA: "ECDHE-RSA-AES256-SHA",
  TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256: "ECDHE-ECDSA-AES128-SHA256",
  TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256: "ECDHE-RSA-AES128-SHA256",
  TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256: "ECDHE-RSA-AES128-GCM-SHA256",
  TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256: "ECDHE-ECDSA-AES128-GCM-SHA256",
  TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384: "ECDHE-RSA-AES256-GCM-SHA384",
  TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384: "ECDHE-ECDSA-AES256-GCM-SHA384",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-RSA-CHACHA20-POLY1305",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256: "ECDHE-ECDSA-CHACHA20-POLY1305",
  TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305: "ECDHE-RSA-CHACHA20-POLY1305",
  TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305: "ECDHE-ECDSA-CHACHA20-POLY1305",
  TLS_AES_128_GCM_SHA256: "TLS_AES_128_GCM_SHA256",
  TLS_AES_256_GCM_SHA384: "TLS_AES_256_GCM_SHA384",
  TLS_CHACHA20_POLY1305_SHA256: "TLS_CHACHA20_POLY1305_SHA256",
};

/**
 * The node:tls `ciphers` string for --cipher-suites, or undefined for the default (empty flag).
 * Throws etcd's error for an unknown name.
 */
export function opensslCiphers(flag: string): string | undefined {
  if (flag === "") return undefined;
  const names = flag.split(",").map((s) => s.trim());
  const out: string[] = [];
  for (const name of names) {
    const openssl = GO_TO_OPENSSL[name];
    if (openssl === undefined) throw new Error(`unexpected TLS cipher suite ${JSON.stringify(name)}`);
    out.push(openssl);
  }
  return out.join(":");
}
