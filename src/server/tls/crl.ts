/**
 * --client-crl-file / --peer-crl-file: etcd's transport.checkCRL. The file (PEM "X509 CRL" or
 * DER) is read again for every connection, so a new CRL takes effect without a restart; a
 * certificate of the peer's chain whose serial number is listed is refused with etcd's text.
 * As in etcd only serial numbers are compared: neither the CRL's signature nor its dates are
 * checked (an expired CRL still revokes).
 */
import { readFileSync } from "node:fs";
import type { PeerCertificate, DetailedPeerCertificate } from "node:tls";
import { children, readElement, Tag } from "./der.js";

/** Serial numbers as upper-case hex without leading zeros (how Node prints them). */
function normalizeSerial(hex: string): string {
  const s = hex.toUpperCase().replace(/^0+/, "");
  return s === "" ? "0" : s;
}

function crlDer(bytes: Buffer): Buffer {
  const text = bytes.toString("latin1");
  const m = /-----BEGIN X509 CRL-----([\s\S]*?)-----END X509 CRL-----/.exec(text);
  return m === null ? bytes : Buffer.from(m[1]!.replace(/\s+/g, ""), "base64");
}

/** The revoked serial numbers of a CRL file's bytes; throws on a malformed CRL. */
export function revokedSerials(bytes: Buffer): Set<string> {
  const list = readElement(crlDer(bytes), 0);
  if (list.tag !== Tag.SEQUENCE) throw new Error("CRL: not a SEQUENCE");
  const tbs = children(list.content)[0];
  if (tbs?.tag !== Tag.SEQUENCE) throw new Error("CRL: no tbsCertList");
  const fields = children(tbs.content);
  let i = fields[0]?.tag === Tag.INTEGER ? 1 : 0; // version
  i += 3; // signature algorithm, issuer, thisUpdate
  const isTime = (tag: number | undefined) => tag === Tag.UTC_TIME || tag === Tag.GENERALIZED_TIME;
  if (isTime(fields[i]?.tag)) i++; // nextUpdate
  const serials = new Set<string>();
  const revoked = fields[i];
  if (revoked === undefined || revoked.tag !== Tag.SEQUENCE) return serials;
  for (const entry of children(revoked.content)) {
    const serial = children(entry.content)[0];
    if (serial?.tag !== Tag.INTEGER) throw new Error("CRL: revoked entry without a serial number");
    serials.add(normalizeSerial(serial.content.toString("hex")));
  }
  return serials;
}

/** The certificates the peer presented, leaf first (the chain Node links through issuerCertificate). */
function chainOf(cert: DetailedPeerCertificate | PeerCertificate): PeerCertificate[] {
  const out: PeerCertificate[] = [];
  let c: DetailedPeerCertificate | PeerCertificate | undefined = cert;
  while (c !== undefined && c.serialNumber !== undefined && !out.includes(c)) {
    out.push(c);
    const next: DetailedPeerCertificate | undefined = (c as DetailedPeerCertificate).issuerCertificate;
    if (next === c) break; // a self-signed root links to itself
    c = next;
  }
  return out;
}

/** etcd's refusal text when a certificate of the chain is revoked by the CRL in `crlFile`, else undefined. */
export function checkCrl(crlFile: string, peer: DetailedPeerCertificate | PeerCertificate): string | undefined {
  const revoked = revokedSerials(readFileSync(crlFile));
  for (const c of chainOf(peer)) {
    const serial = normalizeSerial(c.serialNumber);
    if (revoked.has(serial)) return `transport: certificate serial ${serial.toLowerCase().padStart(serial.length + (serial.length % 2), "0")} revoked`;
  }
  return undefined;
}
