/**
 * Peer TLS: three members over https:// peer URLs with certificates of one CA and
 * --peer-client-cert-auth, three over --peer-auto-tls, and a member whose certificate another CA
 * signed kept out (the other two serve, it gets no data, the refusal is logged with its reason).
 * E2E_TARGET=etcd checks the same expectations against real etcd.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { etcdctl, eventually, Member, sleep } from "./harness.js";
import { type Ca, makeCa, makeLeaf } from "./tls_certs.js";
import { peerTlsCluster, type TlsClusterMember } from "./tls_process.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-tls-peer-"));
let ca: Ca;
const running: Member[] = [];

beforeAll(() => {
  ca = makeCa(dir, "peer-ca");
});
afterAll(async () => {
  if (process.env.TLS_DUMP_LOGS === "1") for (const m of running) console.log(m.log);
  await Promise.all(running.map((m) => m.kill()));
  rmSync(dir, { recursive: true, force: true });
});

function start(spec: TlsClusterMember, tlsArgs: string[]): Member {
  const m = new Member({ name: spec.name, clientPort: spec.clientPort, peerPort: spec.peerPort, dataDir: spec.dataDir }, [...spec.args, ...tlsArgs]);
  running.push(m);
  m.start();
  return m;
}

const endpoint = (s: TlsClusterMember) => `http://127.0.0.1:${s.clientPort}`;

async function writeAndReadEverywhere(specs: readonly TlsClusterMember[], key: string): Promise<void> {
  const put = await etcdctl(endpoint(specs[0]!), ["put", key, "over-peer-tls"]);
  expect(put.stdout.trim()).toBe("OK");
  for (const s of specs) {
    const value = await eventually(async () => {
      const r = await etcdctl(endpoint(s), ["get", key, "--print-value-only", "--consistency=s"]);
      return r.stdout.trim() === "over-peer-tls" ? r.stdout.trim() : undefined;
    }, 20_000, `${key} on ${s.name}`);
    expect(value).toBe("over-peer-tls");
  }
}

describe("peer TLS", () => {
  it("three members with CA-signed certificates and --peer-client-cert-auth replicate", async () => {
    const specs = await peerTlsCluster(join(dir, "ca-cluster"), 3, "peer-tls-ca");
    const members = specs.map((s) => {
      const leaf = makeLeaf(ca, `ca-${s.name}`);
      return start(s, [`--peer-cert-file=${leaf.cert}`, `--peer-key-file=${leaf.key}`, `--peer-trusted-ca-file=${ca.cert}`, "--peer-client-cert-auth"]);
    });
    await Promise.all(members.map((m) => m.waitReady()));
    await writeAndReadEverywhere(specs, "peer-tls-ca");
    const list = await etcdctl(endpoint(specs[1]!), ["member", "list"]);
    for (const s of specs) expect(list.stdout).toContain(`https://127.0.0.1:${s.peerPort}`);
    await Promise.all(members.map((m) => m.kill()));
  });

  it("TLS on both ports: every member serves etcdctl with a client certificate, a follower's lease keep-alive reaches the leader", async () => {
    const specs = await peerTlsCluster(join(dir, "both-cluster"), 3, "peer-tls-both", "https");
    const client = makeLeaf(ca, "both-client");
    const members = specs.map((s) => {
      const leaf = makeLeaf(ca, `both-${s.name}`);
      const files = [`--cert-file=${leaf.cert}`, `--key-file=${leaf.key}`, `--trusted-ca-file=${ca.cert}`, "--client-cert-auth"];
      return start(s, [...files, `--peer-cert-file=${leaf.cert}`, `--peer-key-file=${leaf.key}`, `--peer-trusted-ca-file=${ca.cert}`, "--peer-client-cert-auth"]);
    });
    await Promise.all(members.map((m) => m.waitReady()));
    const tls = [`--cacert=${ca.cert}`, `--cert=${client.cert}`, `--key=${client.key}`];
    for (const s of specs) {
      const ep = `https://127.0.0.1:${s.clientPort}`;
      const grant = await etcdctl(ep, [...tls, "lease", "grant", "60"]);
      const id = /lease ([0-9a-f]+) granted/.exec(grant.stdout)?.[1];
      expect(id, grant.stderr).toBeDefined();
      const keep = await etcdctl(ep, [...tls, "lease", "keep-alive", "--once", id!]);
      expect(keep.stdout, `${s.name}: ${keep.stderr}`).toContain(`lease ${id} keepalived with TTL(60)`);
      const put = await etcdctl(ep, [...tls, "put", `both-${s.name}`, "v"]);
      expect(put.stdout.trim()).toBe("OK");
    }
    await Promise.all(members.map((m) => m.kill()));
  });

  it("three members with --peer-auto-tls replicate and make their certificates in <data-dir>/fixtures/peer", async () => {
    const specs = await peerTlsCluster(join(dir, "auto-cluster"), 3, "peer-tls-auto");
    const members = specs.map((s) => start(s, ["--peer-auto-tls"]));
    await Promise.all(members.map((m) => m.waitReady()));
    await writeAndReadEverywhere(specs, "peer-tls-auto");
    const { existsSync } = await import("node:fs");
    for (const s of specs) expect(existsSync(join(s.dataDir, "fixtures", "peer", "cert.pem"))).toBe(true);
    await Promise.all(members.map((m) => m.kill()));
  });

  it("a member whose certificate another CA signed is kept out and gets no data", async () => {
    const specs = await peerTlsCluster(join(dir, "bad-cluster"), 3, "peer-tls-bad");
    const otherCa = makeCa(dir, "intruder-ca");
    const good = specs.slice(0, 2).map((s) => {
      const leaf = makeLeaf(ca, `bad-${s.name}`);
      return start(s, [`--peer-cert-file=${leaf.cert}`, `--peer-key-file=${leaf.key}`, `--peer-trusted-ca-file=${ca.cert}`, "--peer-client-cert-auth"]);
    });
    const intruderLeaf = makeLeaf(otherCa, "intruder");
    // It trusts the good members' CA, but they do not trust its certificate.
    const intruder = start(specs[2]!, [`--peer-cert-file=${intruderLeaf.cert}`, `--peer-key-file=${intruderLeaf.key}`, `--peer-trusted-ca-file=${ca.cert}`, "--peer-client-cert-auth"]);
    await Promise.all(good.map((m) => m.waitReady()));
    await writeAndReadEverywhere(specs.slice(0, 2), "kept-out");
    await eventually(async () => (good.every((m) => m.log.includes("rejected connection")) ? true : undefined), 20_000, "the good members log the refusal");
    // The reason is logged: etcd and etcetera both say "tls: failed to verify client certificate: x509: certificate signed by unknown authority".
    for (const m of good) {
      const refusals = m.log.split("\n").filter((l) => l.includes("rejected connection"));
      expect(refusals.some((l) => l.includes("failed to verify client certificate: x509: certificate signed by unknown authority"))).toBe(true);
    }
    await sleep(1000);
    const r = await etcdctl(endpoint(specs[2]!), ["--dial-timeout=1s", "--command-timeout=2s", "get", "kept-out", "--print-value-only", "--consistency=s"], undefined, 10_000);
    expect(r.stdout).not.toContain("over-peer-tls");
    expect(intruder.log).not.toContain("became leader");
    await Promise.all([...good, intruder].map((m) => m.kill()));
  });
});
