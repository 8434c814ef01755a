/**
 * TLS on both ports of a chaos cluster (ChaosClusterOptions.tls): one test CA made in the
 * cluster's directory, a certificate per member (server and client use, IP:127.0.0.1) for its
 * client and peer ports, one for the checker's clients (the workload, the read-back, etcdctl),
 * and one per link proxy (tls_proxy.ts). Members run with https:// URLs on both ports,
 * --client-cert-auth and --peer-client-cert-auth, so every byte between members and from the
 * checker is TLS with a verified certificate on both ends.
 */
import { readFileSync } from "node:fs";
import { request } from "node:https";
import { makeCa, makeLeaf, type Ca, type Leaf } from "../e2e/tls_certs.js";
import type { ClientTls } from "./etcd_client.js";
import type { ProxyTransport } from "./proxy.js";
import { emptyTlsProxyStats, tlsProxyTransport, type TlsProxyStats } from "./tls_proxy.js";

/** What a TLS chaos run reports: per proxy, its TLS handshakes both ways and their errors, and whom its connections were classified as. */
export interface ChaosTlsReport {
  proxies: Record<string, TlsProxyStats>;
  /** Per proxy, the sources of its connections at the end of the run (names; "?" unknown), read from decrypted bytes. */
  sources: Record<string, string[]>;
}

const SANS = ["IP:127.0.0.1", "DNS:localhost"];

export class ChaosTls {
  private readonly leaves = new Map<string, Leaf>();
  private readonly proxyStats = new Map<string, TlsProxyStats>();
  /** The checker's client certificate (CN chaos-client). */
  readonly client: ClientTls;

  private constructor(readonly ca: Ca) {
    const leaf = makeLeaf(ca, "chaos-client", SANS);
    this.client = { ca: readFileSync(ca.cert), cert: readFileSync(leaf.cert), key: readFileSync(leaf.key) };
  }

  /** Makes the CA (openssl) in `dir/chaos-ca`. */
  static create(dir: string): ChaosTls {
    return new ChaosTls(makeCa(dir, "chaos-ca"));
  }

  private leaf(cn: string): Leaf {
    let l = this.leaves.get(cn);
    if (l === undefined) {
      l = makeLeaf(this.ca, cn, SANS);
      this.leaves.set(cn, l);
    }
    return l;
  }

  /** The TLS flags of member `name` (its certificate is made on first use: members added at run time too). */
  memberFlags(name: string): string[] {
    const l = this.leaf(`member-${name}`);
    return [
      `--cert-file=${l.cert}`,
      `--key-file=${l.key}`,
      `--trusted-ca-file=${this.ca.cert}`,
      "--client-cert-auth",
      `--peer-cert-file=${l.cert}`,
      `--peer-key-file=${l.key}`,
      `--peer-trusted-ca-file=${this.ca.cert}`,
      "--peer-client-cert-auth",
    ];
  }

  /** etcdctl's flags for the checker's client certificate. */
  ctlFlags(): string[] {
    const l = this.leaf("chaos-client");
    return [`--cacert=${this.ca.cert}`, `--cert=${l.cert}`, `--key=${l.key}`];
  }

  /** The TLS transport of the proxy in front of member `name`, with a certificate of its own. */
  proxyTransport(name: string): ProxyTransport {
    const l = this.leaf(`proxy-${name}`);
    const stats = emptyTlsProxyStats();
    this.proxyStats.set(name, stats);
    return tlsProxyTransport({ ca: readFileSync(this.ca.cert), cert: readFileSync(l.cert), key: readFileSync(l.key) }, stats);
  }

  /** GET `url` (https) with the checker's certificate; the body, or an error for a non-2xx status. */
  get(url: string, timeoutMs: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const req = request(url, { ...this.client, timeout: timeoutMs }, (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d: string) => (body += d));
        res.on("end", () => ((res.statusCode ?? 0) < 300 ? resolve(body) : reject(new Error(`GET ${url}: ${res.statusCode}`))));
        res.on("error", reject);
      });
      req.on("timeout", () => req.destroy(new Error(`GET ${url}: no answer in ${timeoutMs} ms`)));
      req.on("error", reject);
      req.end();
    });
  }

  /** The report, with the current sources of each member's proxy. */
  report(members: ReadonlyArray<{ name: string; proxy: { sources(): string[] } }>): ChaosTlsReport {
    return {
      proxies: Object.fromEntries([...this.proxyStats].map(([n, s]) => [n, structuredClone(s)])),
      sources: Object.fromEntries(members.map((m) => [m.name, [...m.proxy.sources()].sort()])),
    };
  }
}

export function formatTlsReport(r: ChaosTlsReport): string {
  const errs = (e: Record<string, number>) => (Object.keys(e).length === 0 ? "none" : JSON.stringify(e));
  return `TLS on both ports; proxy handshakes (from dialers / to members; errors): ${Object.entries(r.proxies)
    .map(([n, s]) => `${n} ${s.inbound}/${s.upstream} (in: ${errs(s.inboundErrors)}; up: ${errs(s.upstreamErrors)})`)
    .join(", ")}; connections classified at the end: ${Object.entries(r.sources)
    .map(([n, s]) => `${n}←[${s.join(",")}]`)
    .join(" ")}`;
}
