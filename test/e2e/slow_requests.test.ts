/**
 * etcd's "took too long" warnings (--experimental-warning-apply-duration): with the threshold at
 * 1ns every applied request and every range is logged at warn as etcd 3.4 logs it, with the same
 * prefix, the request in Go's protobuf text with etcd's redactions (a value as its size, a lease
 * id in hex) and the response's size, and counted in etcd_server_slow_apply_total. Operators grep
 * these lines, so the text is compared exactly; E2E_TARGET=etcd runs the same expectations against
 * real etcd 3.4 (with --logger=zap).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, etcdctl, eventually } from "./harness.js";
import { parseExposition } from "./prometheus.js";

let cluster: Cluster;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1, extraArgs: ["--logger=zap", "--experimental-warning-apply-duration=1ns"] });
  await cluster.start();
});

afterAll(async () => {
  await cluster?.destroy();
});

interface Warning {
  prefix: string;
  request: string;
  response: string;
  "expected-duration": string;
  took: string;
}

/** The "took too long" warnings logged from `from` on, but for the member's own publish (etcd's is a v2 request). */
function warnings(from: number): Warning[] {
  return cluster.members[0]!.log
    .slice(from)
    .split("\n")
    .filter((l) => l.includes('"msg":"apply request took too long"'))
    .map((l) => JSON.parse(l.slice(l.indexOf("{"))) as Warning)
    .filter((w) => !/Method:"PUT"|member_attributes|cluster_version/.test(w.request));
}

async function ctl(args: string[], input?: string): Promise<string> {
  const r = await etcdctl(cluster.members[0]!.endpoint, args, input);
  expect(r.code, r.stderr).toBe(0);
  return r.stdout.trim();
}

describe("--experimental-warning-apply-duration", () => {
  it("logs every apply and range over the threshold as etcd does", async () => {
    const m = cluster.members[0]!;
    const from = m.log.length;
    await ctl(["put", "foo", "bar"]);
    await ctl(["get", "foo"]);
    await ctl(["txn"], "\nput a b\n\n\n");
    await ctl(["del", "foo"]);
    await ctl(["get", "--prefix", "f", "--limit", "3"]);
    await ctl(["put", "--prev-kv", "a", "c"]);
    await ctl(["txn"], 'value("a") = "c"\n\nput b x\n\nget a\n\n');
    await ctl(["lease", "grant", "60"]);
    // Read-only txns: no proposal, timed like a range, with that prefix.
    await ctl(["txn"], "\nget a\n\n\n");
    await ctl(["txn"], 'value("a") = "c"\n\nget a\nget --prefix b\n\n\n');
    const seen = await eventually(async () => {
      const w = warnings(from);
      return w.length >= 10 ? w : undefined;
    }, 10_000, "ten warnings");
    for (const w of seen) {
      expect(w["expected-duration"]).toBe("1ns");
      expect(w.took).toMatch(/^[0-9.]+(ns|µs|ms|s)$/);
    }
    const shown = seen.map((w) => [w.prefix, w.request.replace(/ID:\d+/g, "ID:<id>").replace(/id:[0-9a-f]{16}/, "id:<lease>"), w.response]);
    expect(shown.slice(0, 7)).toEqual([
      ["", 'header:<ID:<id> > put:<key:"foo" value_size:3 >', "size:4"],
      ["read-only range ", 'key:"foo" ', "range_response_count:1 size:24"],
      ["", 'header:<ID:<id> > txn:<compare:<> success:<request_put:<key:"a" value_size:1 >> failure:<>>', "size:14"],
      ["", 'header:<ID:<id> > delete_range:<key:"foo" > ', "size:6"],
      ["read-only range ", 'key:"f" range_end:"g" limit:3 ', "range_response_count:0 size:4"],
      ["", 'header:<ID:<id> > put:<key:"a" value_size:1 prev_kv:true >', "size:18"],
      ["", 'header:<ID:<id> > txn:<compare:<target:VALUE key:"a" value_size:1 > success:<request_put:<key:"b" value_size:1 >> failure:<request_range:<key:"a" > >>', "size:14"],
    ]);
    // The lease's response carries the whole header, whose ids differ from member to member.
    expect(shown[7]![1]).toBe("header:<ID:<id> > lease_grant:<ttl:60-second id:<lease>>");
    expect(shown[7]![2]).toMatch(/^size:\d+$/);
    expect(shown.slice(8)).toEqual([
      ["read-only range ", 'compare:<> success:<request_range:<key:"a" > > failure:<>', "responses:<range_response_count:1> size:30"],
      [
        "read-only range ",
        'compare:<target:VALUE key:"a" value_size:1 > success:<request_range:<key:"a" >  request_range:<key:"b" range_end:"c" > > failure:<>',
        "responses:<range_response_count:1 range_response_count:1> size:54",
      ],
    ]);
  });

  it("with --logger=capnslog, in etcd 3.4's words", async () => {
    const c = await Cluster.create({ size: 1, extraArgs: ["--logger=capnslog", "--experimental-warning-apply-duration=1ns"] });
    try {
      await c.start();
      const m = c.members[0]!;
      const from = m.log.length;
      expect((await etcdctl(m.endpoint, ["put", "foo", "bar"])).code).toBe(0);
      expect((await etcdctl(m.endpoint, ["get", "foo"])).code).toBe(0);
      const put = /W \| etcdserver: request "header:<ID:\d+ > put:<key:\\"foo\\" value_size:3 >" with result "size:4" took too long \([0-9.]+(ns|µs|ms|s)\) to execute/;
      const range = /W \| etcdserver: read-only range request "key:\\"foo\\" " with result "range_response_count:1 size:24" took too long \([0-9.]+(ns|µs|ms|s)\) to execute/;
      await eventually(async () => (put.test(m.log.slice(from)) && range.test(m.log.slice(from)) ? true : undefined), 10_000, "the two capnslog lines");
    } finally {
      await c.destroy();
    }
  });

  it("counts them in etcd_server_slow_apply_total", async () => {
    const res = await fetch(`${cluster.members[0]!.clientUrl}/metrics`);
    const family = parseExposition(await res.text()).get("etcd_server_slow_apply_total");
    expect(family?.samples[0]?.value).toBeGreaterThanOrEqual(10);
  });
});
