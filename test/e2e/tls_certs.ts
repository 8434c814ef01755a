/**
 * Certificates for the TLS tests, made with openssl in the test's directory: a CA, leaf
 * certificates it signs (server and client use, SANs chosen by the test), and a CRL revoking some.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";

export interface Ca {
  readonly dir: string;
  readonly cert: string;
  readonly key: string;
}

export interface Leaf {
  readonly cert: string;
  readonly key: string;
}

function openssl(args: string[], cwd: string): void {
  execFileSync("openssl", args, { cwd, stdio: ["ignore", "ignore", "pipe"] });
}

/** A self-signed CA named `name` in `dir/name`. */
export function makeCa(dir: string, name: string): Ca {
  const d = join(dir, name);
  mkdirSync(d, { recursive: true });
  openssl(
    ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-subj", `/CN=${name}`, "-days", "30"],
    d,
  );
  writeFileSync(join(d, "index.txt"), "");
  writeFileSync(join(d, "crlnumber"), "01\n");
  writeFileSync(
    join(d, "ca.cnf"),
    `[ ca ]\ndefault_ca = CA_default\n[ CA_default ]\ndatabase = ${join(d, "index.txt")}\ncrlnumber = ${join(d, "crlnumber")}\ndefault_md = sha256\ndefault_crl_days = 30\n`,
  );
  return { dir: d, cert: join(d, "ca.pem"), key: join(d, "ca.key") };
}

/** A certificate for `cn` signed by `ca`, with SANs such as "IP:127.0.0.1" or "DNS:localhost". */
export function makeLeaf(ca: Ca, cn: string, sans: readonly string[] = ["IP:127.0.0.1", "DNS:localhost"]): Leaf {
  const base = join(ca.dir, cn);
  const ext = `${base}.ext`;
  const lines = ["keyUsage=critical,digitalSignature,keyEncipherment", "extendedKeyUsage=serverAuth,clientAuth", "basicConstraints=critical,CA:FALSE"];
  if (sans.length > 0) lines.push(`subjectAltName=${sans.join(",")}`);
  writeFileSync(ext, lines.join("\n") + "\n");
  openssl(["req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", `${base}.key`, "-out", `${base}.csr`, "-subj", `/CN=${cn}`], ca.dir);
  openssl(
    ["x509", "-req", "-in", `${base}.csr`, "-CA", ca.cert, "-CAkey", ca.key, "-set_serial", `0x${randomBytes(8).toString("hex")}`, "-days", "30", "-extfile", ext, "-out", `${base}.pem`],
    ca.dir,
  );
  return { cert: `${base}.pem`, key: `${base}.key` };
}

/** A CRL of `ca` revoking `revoked`, written to `ca.dir/crl.pem` (returned). */
export function makeCrl(ca: Ca, revoked: readonly Leaf[]): string {
  const cnf = join(ca.dir, "ca.cnf");
  for (const leaf of revoked) openssl(["ca", "-config", cnf, "-revoke", leaf.cert, "-keyfile", ca.key, "-cert", ca.cert], ca.dir);
  const out = join(ca.dir, "crl.pem");
  openssl(["ca", "-config", cnf, "-gencrl", "-keyfile", ca.key, "-cert", ca.cert, "-out", out], ca.dir);
  return out;
}
