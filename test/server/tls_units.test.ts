/** The TLS pieces on their own: cipher suite names, CRL parsing, the auto-TLS certificate, the TLS config rules. */
import { X509Certificate } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { parseConfig } from "../../src/server/config.js";
import { makeSelfSignedCert, selfCert, urlHosts } from "../../src/server/tls/auto_tls.js";
import { opensslCiphers } from "../../src/server/tls/cipher_suites.js";
import { revokedSerials } from "../../src/server/tls/crl.js";
import { makeCa, makeCrl, makeLeaf } from "../e2e/tls_certs.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-tls-units-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("--cipher-suites", () => {
  it("maps Go's names to OpenSSL's, the legacy CHACHA20 names too", () => {
    expect(opensslCiphers("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305")).toBe("ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305");
    expect(opensslCiphers("")).toBeUndefined();
  });
  it("refuses an unknown name with etcd's text", () => {
    expect(() => opensslCiphers("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,bogus")).toThrow('unexpected TLS cipher suite "bogus"');
  });
});

describe("CRL", () => {
  it("lists the serial numbers openssl revoked, PEM and DER alike", () => {
    const ca = makeCa(dir, "crl-ca");
    const a = makeLeaf(ca, "a");
    const b = makeLeaf(ca, "b");
    const crl = makeCrl(ca, [b]);
    const serials = revokedSerials(readFileSync(crl));
    expect(serials.has(new X509Certificate(readFileSync(b.cert)).serialNumber.replace(/^0+/, ""))).toBe(true);
    expect(serials.has(new X509Certificate(readFileSync(a.cert)).serialNumber.replace(/^0+/, ""))).toBe(false);
    expect(serials.size).toBe(1);
    expect(() => revokedSerials(Buffer.from("not a crl"))).toThrow();
  });
});

describe("auto TLS", () => {
  it("makes a self-signed certificate for the listen URLs' hosts", () => {
    const { certPem, keyPem } = makeSelfSignedCert(urlHosts(["https://127.0.0.1:2379", "https://[::1]:2379", "https://etcd.example:2379"]));
    const x = new X509Certificate(certPem);
    expect(x.checkIP("127.0.0.1")).toBe("127.0.0.1");
    expect(x.checkIP("::1")).toBeDefined();
    expect(x.checkHost("etcd.example")).toBe("etcd.example");
    expect(x.subject).toBe("O=etcd");
    expect(x.verify(x.publicKey)).toBe(true);
    expect(keyPem).toContain("BEGIN EC PRIVATE KEY");
  });
  it("reuses the files of an earlier start", () => {
    const d = join(dir, "fixtures");
    const first = selfCert(d, ["127.0.0.1"]);
    const pem = readFileSync(first.certFile, "utf8");
    const second = selfCert(d, ["127.0.0.1"]);
    expect(first.generated).toBe(true);
    expect(second.generated).toBe(false);
    expect(readFileSync(second.certFile, "utf8")).toBe(pem);
  });
});

describe("TLS configuration", () => {
  const https = ["--listen-client-urls=https://127.0.0.1:2379", "--advertise-client-urls=https://127.0.0.1:2379"];
  it("an https client URL with --auto-tls or a key pair is accepted", () => {
    expect(parseConfig([...https, "--auto-tls"], {}).tls.client.autoTls).toBe(true);
    const c = parseConfig([...https, "--cert-file=c.pem", "--key-file=k.pem", "--client-cert-auth", "--trusted-ca-file=ca.pem"], {});
    expect(c.tls.client).toMatchObject({ certFile: "c.pem", keyFile: "k.pem", clientCertAuth: true, trustedCaFile: "ca.pem" });
  });
  it("the client TLS flags come from ETCD_* too", () => {
    const c = parseConfig(https, { ETCD_CERT_FILE: "c.pem", ETCD_KEY_FILE: "k.pem", ETCD_CLIENT_CERT_AUTH: "true", ETCD_CLIENT_CRL_FILE: "crl.pem" });
    expect(c.tls.client).toMatchObject({ certFile: "c.pem", keyFile: "k.pem", clientCertAuth: true, crlFile: "crl.pem" });
  });
  it("a cert file without its key is refused", () => {
    expect(() => parseConfig([...https, "--cert-file=c.pem"], {})).toThrow("--cert-file and --key-file must be given together");
  });
});
