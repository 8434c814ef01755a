/**
 * --auto-tls / --peer-auto-tls: etcd's transport.SelfCert. A self-signed certificate and key,
 * made at the first start in `<data-dir>/fixtures/client` (or `/peer`) as cert.pem and key.pem
 * and reused by later starts, for the hosts of the listen URLs (IPs as IP SANs, names as DNS
 * SANs), organization "etcd", valid for one year, for server and client use.
 *
 * Differences from etcd 3.4: the key is ECDSA P-256 signed with SHA-256 (etcd: P-521), and the
 * certificate also allows client use (peers present it when dialing).
 */
import { createPrivateKey, generateKeyPairSync, randomBytes, sign } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { join } from "node:path";
import { oid, seq, Tag, time, tlv, unsignedInteger } from "./der.js";

const ECDSA_WITH_SHA256 = "1.2.840.10045.4.3.2";
const ORGANIZATION = "2.5.4.10";
const KEY_USAGE = "2.5.29.15";
const EXT_KEY_USAGE = "2.5.29.37";
const BASIC_CONSTRAINTS = "2.5.29.19";
const SUBJECT_ALT_NAME = "2.5.29.17";
const SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";
const VALIDITY_MS = 365 * 24 * 3600 * 1000;

export interface SelfCertFiles {
  readonly certFile: string;
  readonly keyFile: string;
  /** False when an earlier start's files were reused. */
  readonly generated: boolean;
}

function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split(".").map(Number));
  // IPv6: expand "::" then write 8 groups of 16 bits.
  const [head, tail] = ip.includes("::") ? ip.split("::") : [ip, undefined];
  const h = head === "" || head === undefined ? [] : head.split(":");
  const t = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill("0"), ...t];
  const out = Buffer.alloc(16);
  groups.forEach((g, i) => out.writeUInt16BE(parseInt(g, 16), i * 2));
  return out;
}

/** A DER X.509 v3 certificate for `hosts`, self-signed with a new P-256 key; returns both as PEM. */
export function makeSelfSignedCert(hosts: readonly string[], now = new Date()): { certPem: string; keyPem: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ec", { namedCurve: "P-256" });
  const algorithm = seq(oid(ECDSA_WITH_SHA256));
  const name = seq(tlv(Tag.SET, seq(oid(ORGANIZATION), tlv(Tag.UTF8_STRING, Buffer.from("etcd")))));
  const serial = randomBytes(16);
  serial[0] = serial[0]! & 0x7f;
  const altNames: Buffer[] = [];
  for (const host of new Set(hosts)) {
    if (host === "") continue;
    if (isIP(host) !== 0) altNames.push(tlv(0x87, ipBytes(host)));
    else altNames.push(tlv(0x82, Buffer.from(host, "ascii")));
  }
  const critical = tlv(Tag.BOOLEAN, Buffer.from([0xff]));
  const extensions = [
    // digitalSignature (bit 0) and keyEncipherment (bit 2): 5 unused bits of 0b101.
    seq(oid(KEY_USAGE), critical, tlv(Tag.OCTET_STRING, tlv(Tag.BIT_STRING, Buffer.from([0x05, 0xa0])))),
    seq(oid(EXT_KEY_USAGE), tlv(Tag.OCTET_STRING, seq(oid(SERVER_AUTH), oid(CLIENT_AUTH)))),
    seq(oid(BASIC_CONSTRAINTS), critical, tlv(Tag.OCTET_STRING, seq())),
  ];
  if (altNames.length > 0) extensions.push(seq(oid(SUBJECT_ALT_NAME), tlv(Tag.OCTET_STRING, seq(...altNames))));
  const tbs = seq(
    tlv(0xa0, tlv(Tag.INTEGER, Buffer.from([2]))),
    unsignedInteger(serial),
    algorithm,
    name,
    seq(time(now), time(new Date(now.getTime() + VALIDITY_MS))),
    name,
    publicKey.export({ type: "spki", format: "der" }),
    tlv(0xa3, seq(...extensions)),
  );
  const signature = sign("sha256", tbs, { key: privateKey, dsaEncoding: "der" });
  const cert = seq(tbs, algorithm, tlv(Tag.BIT_STRING, Buffer.from([0]), signature));
  const b64 = cert.toString("base64").replace(/(.{64})/g, "$1\n");
  return {
    certPem: `-----BEGIN CERTIFICATE-----\n${b64.endsWith("\n") ? b64 : b64 + "\n"}-----END CERTIFICATE-----\n`,
    keyPem: privateKey.export({ type: "sec1", format: "pem" }).toString(),
  };
}

/** etcd's SelfCert: reuse `dir`/cert.pem and key.pem if both exist, else make them (key mode 0600). */
export function selfCert(dir: string, hosts: readonly string[]): SelfCertFiles {
  const certFile = join(dir, "cert.pem");
  const keyFile = join(dir, "key.pem");
  if (existsSync(certFile) && existsSync(keyFile)) {
    createPrivateKey(readFileSync(keyFile)); // throws on garbage before the listener does
    return { certFile, keyFile, generated: false };
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const { certPem, keyPem } = makeSelfSignedCert(hosts);
  writeFileSync(keyFile, keyPem, { mode: 0o600 });
  writeFileSync(certFile, certPem, { mode: 0o644 });
  return { certFile, keyFile, generated: true };
}

/** The host part of each URL (`host:port` → host, brackets off), for the certificate's SANs. */
export function urlHosts(urls: readonly string[]): string[] {
  return urls.map((u) => {
    const host = u.slice(u.indexOf("://") + 3).replace(/:[0-9]*$/, "");
    return host.replace(/^\[|\]$/g, "");
  });
}
