/**
 * A TLS URL without a key and certificate never starts a member: etcd's own error texts, exit 1.
 * E2E_TARGET=etcd checks the same expectations against real etcd.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runToExit, singleMemberArgs } from "./tls_process.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-tls-refusals-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("TLS URLs without certificates are refused", () => {
  it("an https client URL without --cert-file/--key-file", async () => {
    const m = await singleMemberArgs(join(dir, "c1"), "https", "http");
    const r = await runToExit(m.args);
    expect(r.code).toBe(1);
    expect(r.log).toContain(`TLS key/cert (--cert-file, --key-file) must be provided for client url https://127.0.0.1:${m.clientPort} with HTTPS scheme`);
  });

  it("a unixs client URL without --cert-file/--key-file", async () => {
    const m = await singleMemberArgs(join(dir, "c2"), "http", "http");
    const args = m.args.map((a) => (a.startsWith("--listen-client-urls=") ? `--listen-client-urls=unixs://127.0.0.1:${m.clientPort}` : a));
    const r = await runToExit(args);
    expect(r.code).toBe(1);
    expect(r.log).toContain(`TLS key/cert (--cert-file, --key-file) must be provided for client url unixs://127.0.0.1:${m.clientPort} with HTTPS scheme`);
  });

  it("an https peer URL without --peer-cert-file/--peer-key-file", async () => {
    const m = await singleMemberArgs(join(dir, "p1"), "http", "https");
    const r = await runToExit(m.args);
    expect(r.code).toBe(1);
    expect(r.log).toContain(`cannot listen on TLS for 127.0.0.1:${m.peerPort}: KeyFile and CertFile are not presented`);
  });

  it("the same from ETCD_* variables", async () => {
    const m = await singleMemberArgs(join(dir, "e1"), "http", "http");
    const url = `https://127.0.0.1:${m.clientPort}`;
    const args = m.args.filter((a) => !a.startsWith("--listen-client-urls=") && !a.startsWith("--advertise-client-urls="));
    const r = await runToExit(args, { ETCD_LISTEN_CLIENT_URLS: url, ETCD_ADVERTISE_CLIENT_URLS: url });
    expect(r.code).toBe(1);
    expect(r.log).toContain(`TLS key/cert (--cert-file, --key-file) must be provided for client url ${url} with HTTPS scheme`);
  });
});
