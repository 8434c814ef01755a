/**
 * --host-whitelist as etcd 3.4 applies it (embed/serve.go's access controller): a plaintext HTTP
 * request on the client port whose Host (its host part) is not in the list gets 421 and etcd's
 * explanation before anything else (no CORS headers, OPTIONS included); a listed Host is served; gRPC, the
 * --listen-metrics-urls port and requests over TLS are not checked. E2E_TARGET=etcd runs the same
 * against real etcd.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { b64, request, type HttpAnswer } from "./gateway_client.js";
import { Cluster, etcdctl, Member } from "./harness.js";
import { makeCa, makeLeaf } from "./tls_certs.js";
import { singleMemberArgs } from "./tls_process.js";

/** etcd's answer to a refused Host: 421 and its explanation, which names the refused host name. */
const invalidHost = (hostname: string) => ({
  status: 421,
  body: `
etcd received your request, but the Host header was unrecognized.

To fix this, choose one of the following options:
- Enable TLS, then any HTTPS request will be allowed.
- Add the hostname you want to use to the whitelist in settings.
  - e.g. etcd --host-whitelist "${hostname}"

This requirement has been added to help prevent "DNS Rebinding" attacks (CVE-2018-5702).

`,
  contentType: "text/plain; charset=utf-8",
  cors: undefined,
});

let cluster: Cluster;
let port = 0;

const shape = (a: HttpAnswer) => ({ status: a.status, body: a.body, contentType: a.headers["content-type"], cors: a.headers["access-control-allow-origin"] });
const get = (endpoint: string, path: string, host: string, method = "GET") => request(endpoint, path, "", { method, headers: { Host: host } });

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1, metrics: true, extraArgs: ["--host-whitelist=localhost,etcd.example"] });
  await cluster.start();
  port = cluster.members[0]!.spec.clientPort;
});
afterAll(async () => {
  await cluster?.destroy();
});

describe("--host-whitelist on a plaintext client port", () => {
  it("serves a listed Host, with or without its port", async () => {
    const ep = cluster.members[0]!.endpoint;
    for (const host of [`localhost:${port}`, "localhost", `etcd.example:${port}`]) {
      const r = await get(ep, "/health", host);
      expect([host, r.status, r.body]).toEqual([host, 200, '{"health":"true"}']);
    }
    const put = await request(ep, "/v3/kv/put", JSON.stringify({ key: b64("h"), value: b64("1") }), { headers: { Host: `localhost:${port}` } });
    expect(put.status).toBe(200);
  });

  it("refuses any other Host with 421 and etcd's text, before CORS and OPTIONS, on every path", async () => {
    const ep = cluster.members[0]!.endpoint;
    const refused: Array<[string, string]> = [
      [`127.0.0.1:${port}`, "127.0.0.1"],
      [`evil.example:${port}`, "evil.example"],
      ["localhost.evil.example", "localhost.evil.example"],
      ["etcd.example.:80", "etcd.example."],
      [`[::1]:${port}`, "::1"],
    ];
    for (const [host, hostname] of refused) {
      expect(shape(await get(ep, "/health", host)), host).toEqual(invalidHost(hostname));
    }
    expect(shape(await get(ep, "/version", "evil.example"))).toEqual(invalidHost("evil.example"));
    expect(shape(await get(ep, "/v3/kv/range", "evil.example", "OPTIONS"))).toEqual(invalidHost("evil.example"));
    const put = await request(ep, "/v3/kv/put", JSON.stringify({ key: b64("evil"), value: b64("1") }), { headers: { Host: "evil.example" } });
    expect(shape(put)).toEqual(invalidHost("evil.example"));
    // Nothing was written by the refused put.
    const r = await etcdctl(ep, ["get", "evil"]);
    expect([r.code, r.stdout]).toEqual([0, ""]);
  });

  it("does not check gRPC or the metrics port", async () => {
    const m = cluster.members[0]!;
    const r = await etcdctl(m.endpoint, ["put", "g", "1"]);
    expect([r.code, r.stdout]).toEqual([0, "OK\n"]);
    const metrics = await get(m.metricsUrl!.replace("http://", ""), "/health", "evil.example");
    expect(metrics.status).toBe(200);
  });
});

describe("--host-whitelist on a TLS client port", () => {
  const dir = mkdtempSync(join(tmpdir(), "etcetera-host-whitelist-"));
  let member: Member | undefined;
  afterAll(async () => {
    await member?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("is not applied: a request over TLS is served whatever its Host", async () => {
    const ca = makeCa(dir, "ca");
    const leaf = makeLeaf(ca, "server");
    const m = await singleMemberArgs(join(dir, "m1"), "https", "http");
    member = new Member({ name: "m1", clientPort: m.clientPort, peerPort: m.peerPort, dataDir: join(dir, "m1") }, [
      ...m.args,
      `--cert-file=${leaf.cert}`,
      `--key-file=${leaf.key}`,
      "--host-whitelist=localhost",
    ]);
    member.start();
    await member.waitReady();
    const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpsRequest(
        { host: "127.0.0.1", port: m.clientPort, path: "/health", method: "GET", headers: { Host: "evil.example" }, ca: [readFileSync(ca.cert)], servername: "localhost" },
        (res) => {
          let body = "";
          res.on("data", (c: Buffer) => (body += c.toString()));
          res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
        },
      );
      req.on("error", reject);
      req.end();
    });
    expect(answer).toEqual({ status: 200, body: '{"health":"true"}' });
  }, 60_000);
});
