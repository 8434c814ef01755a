/**
 * --experimental-front-ends=2 (issue 18, docs/multicore.md): the client port served by two
 * front-end processes that hand every call to the member's core over a pipe.
 *
 * What a client sees must not change, so one transcript of client-visible answers (etcdctl's
 * output, the etcd3 client, a raw gRPC client for exact status texts, the JSON gateway, /health)
 * is taken from a member with front ends 0 and from one with 2, and the two must be equal; each
 * step also asserts its answer, so E2E_TARGET=etcd runs the same transcript against etcd (which
 * has no such flag: there it is taken once, without it).
 *
 * The rest is etcetera-only by nature, whatever E2E_TARGET says: it tests the member's own
 * process layout (the front ends are child processes of the member; one killed with SIGKILL is
 * forked again while the member keeps serving; a core killed with SIGKILL leaves no front end
 * serving), which etcd, one Go process, does not have.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Etcd3, type IKeyValue } from "etcd3";
import { afterAll, describe, expect, it } from "vitest";
import { request } from "./gateway_client.js";
import { type CallError, clients, unary } from "./grpc_client.js";
import { reservePort } from "../ports.js";
import { Cluster, etcdctl, eventually, Member, type MemberSpec, oneMemberYamlLines, sleep, TARGET_ETCD } from "./harness.js";
import { makeCa, makeLeaf } from "./tls_certs.js";
import { singleMemberArgs } from "./tls_process.js";

const FRONT_ENDS = ["--experimental-front-ends=2"];
const clusters: Cluster[] = [];

afterAll(async () => {
  for (const c of clusters) await c.destroy();
});

async function started(opts: Parameters<typeof Cluster.create>[0]): Promise<Cluster> {
  const cluster = await Cluster.create(opts);
  clusters.push(cluster);
  await cluster.start();
  return cluster;
}

/** A failed call as "code message", a successful one as "ok". */
async function outcome(p: Promise<unknown>): Promise<string> {
  try {
    await p;
    return "ok";
  } catch (e) {
    const err = e as CallError;
    return `${err.code} ${err.details}`;
  }
}

/** etcdctl's answer with lease ids replaced (they are random per member). */
async function ctl(endpoint: string, args: string[], input?: string): Promise<string> {
  const r = await etcdctl(endpoint, args, input);
  return `${r.code} ${r.stdout.trim()} ${r.stderr.trim()}`.replace(/\b[0-9a-f]{16}\b/g, "<lease>").replace(/\{"level".*?\}\s*/g, "");
}

/** The client-visible answers of one member to one fixed sequence of requests. */
async function transcript(cluster: Cluster): Promise<string[]> {
  const m = cluster.members[0]!;
  const ep = m.endpoint;
  const lines: string[] = [];
  const step = (line: string): string => {
    lines.push(line);
    return line;
  };

  // KV through etcdctl.
  expect(step(await ctl(ep, ["put", "fe/a", "1"]))).toBe("0 OK ");
  expect(step(await ctl(ep, ["get", "fe/a"]))).toBe("0 fe/a\n1 ");
  expect(step(await ctl(ep, ["txn"], 'value("fe/a") = "1"\n\nput fe/b 2\n\nput fe/c 3\n\n'))).toBe("0 SUCCESS\n\nOK ");
  expect(step(await ctl(ep, ["del", "fe/a"]))).toBe("0 1 ");
  expect(step(await ctl(ep, ["get", "--prefix", "fe/", "--keys-only"]))).toBe("0 fe/b ");

  // Exact status texts: the core's size check, and the front end's gRPC receive limit (max-request-bytes + 512 KiB).
  const c = clients(ep);
  try {
    expect(step(await outcome(unary(c.kv, "Put", { key: Buffer.from("fe/big"), value: Buffer.alloc(1_600_000) })))).toBe("3 etcdserver: request is too large");
    expect(step(await outcome(unary(c.kv, "Put", { key: Buffer.from("fe/big"), value: Buffer.alloc(2_200_000) })))).toMatch(/^8 .*larger than max/);
    expect(step(await outcome(unary(c.lease, "LeaseRevoke", { ID: "12345" })))).toBe("5 etcdserver: requested lease not found");
    expect(step(await outcome(unary(c.kv, "Range", { key: Buffer.from("fe/b") }, { deadlineMs: 10_000 })))).toBe("ok");
  } finally {
    c.close();
  }

  // Watch with many events, then cancel; lease grant, keep-alive, revoke (the etcd3 client).
  const client = new Etcd3({ hosts: m.clientUrl });
  try {
    const watcher = await client.watch().prefix("few/").create();
    const seen: string[] = [];
    watcher.on("put", (kv: IKeyValue) => seen.push(`${kv.key.toString()}=${kv.value.toString()}`));
    const events = 400;
    for (let i = 0; i < events; i += 20) await Promise.all(Array.from({ length: 20 }, (_, j) => client.put(`few/${i + j}`).value(String(i + j))));
    await eventually(async () => (seen.length >= events ? true : undefined), 20_000, "watch events");
    expect(seen.sort()).toEqual(Array.from({ length: events }, (_, i) => `few/${i}=${i}`).sort());
    step(`watch ${seen.length}`);
    await watcher.cancel();
    await client.put("few/after").value("x");
    await sleep(200);
    expect(step(`after cancel ${seen.length}`)).toBe(`after cancel ${events}`);

    const lease = client.lease(60, { autoKeepAlive: false });
    await lease.put("fel/k").value("v");
    await lease.keepaliveOnce();
    expect(step(String(await client.get("fel/k").string()))).toBe("v");
    await lease.revoke();
    expect(step(String(await client.get("fel/k").string()))).toBe("null");
  } finally {
    client.close();
  }
  expect(step(await ctl(ep, ["lease", "grant", "60"]))).toBe("0 lease <lease> granted with TTL(60s) ");

  // Auth with a token: etcdctl authenticates and sends the token on every call.
  expect(step(await ctl(ep, ["user", "add", "root:rootpw"]))).toBe("0 User root created ");
  expect(step(await ctl(ep, ["auth", "enable"]))).toBe("0 Authentication Enabled ");
  expect(step(await ctl(ep, ["--user=root:rootpw", "put", "fea/k", "v"]))).toBe("0 OK ");
  expect(step(await ctl(ep, ["--user=root:rootpw", "get", "fea/k", "--print-value-only"]))).toBe("0 v ");
  step(await ctl(ep, ["get", "fea/k"]));
  expect(lines.at(-1)).toMatch(/user name is empty|permission denied/);
  expect(step(await ctl(ep, ["--user=root:wrong", "get", "fea/k"]))).toMatch(/authentication failed, invalid user ID or password/);
  expect(step(await ctl(ep, ["--user=root:rootpw", "auth", "disable"]))).toBe("0 Authentication Disabled ");

  // The JSON gateway, /health and an unknown path, over HTTP/1.1 (with the headers that say how the body was framed).
  const range = await request(ep, "/v3/kv/range", JSON.stringify({ key: Buffer.from("fe/b").toString("base64") }));
  const json = JSON.parse(range.body) as { kvs: { key: string; value: string }[]; count: string };
  expect(step(`${range.status} ${range.headers["content-type"]} ${range.headers["transfer-encoding"] ?? "-"} ${JSON.stringify(json.kvs.map((kv) => [kv.key, kv.value]))} ${json.count}`)).toBe(
    `200 application/json - ${JSON.stringify([[Buffer.from("fe/b").toString("base64"), Buffer.from("2").toString("base64")]])} 1`,
  );
  const health = await request(ep, "/health", "", { method: "GET" });
  expect(step(`${health.status} ${health.body.trim()}`)).toMatch(/^200 \{"health":"true"/);
  const missing = await request(ep, "/no/such/path", "", { method: "GET" });
  expect(step(`${missing.status} ${missing.body}`)).toBe("404 404 page not found\n");
  return lines;
}

/** The member's child processes (its front ends), from /proc. */
function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
  return text === "" ? [] : text.split(" ").map(Number);
}

/** Starts `m` (one front end) and waits until it serves: the core's pid and its front end's. */
async function startWithOneFrontEnd(m: Member): Promise<{ pid: number; first: number }> {
  m.start();
  await m.waitReady();
  const pid = m.proc!.pid!;
  const [first] = childrenOf(pid);
  expect(first).toBeDefined();
  return { pid, first: first! };
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe("--experimental-front-ends", () => {
  it("answers every client request as the single-process member does", async () => {
    const single = await transcript(await started({ size: 1 }));
    if (TARGET_ETCD) return; // etcd has no such flag: its transcript passed every step's assertion above
    const withFrontEnds = await transcript(await started({ size: 1, extraArgs: FRONT_ENDS }));
    expect(withFrontEnds).toEqual(single);
  });

  // etcetera-only (see the file comment): the member's process layout.
  it("keeps serving when a front end is killed, and forks it again", async () => {
    const cluster = await started({ size: 1, extraArgs: FRONT_ENDS, target: "etcetera" });
    const m = cluster.members[0]!;
    const pid = m.proc!.pid!;
    const before = childrenOf(pid);
    expect(before).toHaveLength(2);
    expect(await ctl(m.endpoint, ["put", "fk/a", "1"])).toBe("0 OK ");
    process.kill(before[0]!, "SIGKILL");
    // Whichever front end accepts the next connections, the member answers.
    for (let i = 0; i < 10; i++) expect(await ctl(m.endpoint, ["get", "fk/a", "--print-value-only"])).toBe("0 1 ");
    const after = await eventually(async () => {
      const now = childrenOf(pid);
      return now.length === 2 && !now.includes(before[0]!) ? now : undefined;
    }, 20_000, "a new front end");
    expect(after).toContain(before[1]!);
    await eventually(async () => (m.log.includes("front end exited; forking it again") ? true : undefined), 5_000, "the re-fork's log line");
    for (let i = 0; i < 10; i++) expect(await ctl(m.endpoint, ["put", `fk/${i}`, String(i)])).toBe("0 OK ");
  });

  it("a core killed with SIGKILL leaves no front end serving; SIGTERM stops them with it", async () => {
    const cluster = await started({ size: 1, extraArgs: FRONT_ENDS, target: "etcetera" });
    const m = cluster.members[0]!;
    const frontEnds = childrenOf(m.proc!.pid!);
    expect(frontEnds).toHaveLength(2);
    await m.kill("SIGKILL");
    await eventually(async () => (frontEnds.every((p) => !alive(p)) ? true : undefined), 10_000, "front ends gone");
    expect((await etcdctl(m.endpoint, ["get", "x"], undefined, 5_000)).code).not.toBe(0);

    m.start();
    await m.waitReady();
    const again = childrenOf(m.proc!.pid!);
    expect(again).toHaveLength(2);
    await m.kill("SIGTERM");
    expect(again.filter(alive)).toEqual([]);
    expect(m.log).toContain("stopped");

    // systemd's stop (KillMode=control-group) signals the core and its front ends at once: a stop
    // like any other, with no error logged (the front ends' pipes may reset as they exit).
    const from = m.log.length;
    m.start();
    await m.waitReady();
    const group = [m.proc!.pid!, ...childrenOf(m.proc!.pid!)];
    expect(group).toHaveLength(3);
    const exited = new Promise<void>((resolve) => m.proc!.once("exit", () => resolve()));
    for (const pid of group) process.kill(pid, "SIGTERM");
    await exited;
    await eventually(async () => (group.every((p) => !alive(p)) ? true : undefined), 10_000, "every process of the member gone");
    const log = m.log.slice(from);
    expect(log).toContain("stopped");
    expect(log.split("\n").filter((l) => l.includes('"level":"error"') || l.includes('"level":"fatal"'))).toEqual([]);
  });

  it("a front end forked again after the config file was edited serves what the core read, not the edit", async () => {
    const dir = mkdtempSync(join(tmpdir(), "e2e-fe-config-"));
    const s: MemberSpec = { name: "fe-file", clientPort: await reservePort(), peerPort: await reservePort(), dataDir: join(dir, "data") };
    const path = join(dir, "etcd.conf.yml");
    const yaml = (extra: string): string =>
      [
        ...oneMemberYamlLines(s),
        "experimental-front-ends: 1",
        extra,
      ].join("\n");
    writeFileSync(path, yaml(""));
    const m = new Member(s, ["--config-file", path], {}, "etcetera");
    try {
      const { pid, first } = await startWithOneFrontEnd(m);
      expect(await ctl(m.endpoint, ["put", "fef/a", "1"])).toBe("0 OK ");
      // The file now holds settings no member could start with; the running member keeps what it read.
      writeFileSync(path, yaml('heartbeat-interval: "100"'));
      process.kill(first, "SIGKILL");
      await eventually(async () => {
        const now = childrenOf(pid);
        return now.length === 1 && now[0] !== first && m.log.split("front end serving the client URLs").length === 3 ? true : undefined;
      }, 20_000, "a new front end serving");
      for (let i = 0; i < 5; i++) expect(await ctl(m.endpoint, ["get", "fef/a", "--print-value-only"])).toBe("0 1 ");
      expect(m.log).not.toContain("front end did not start again");
    } finally {
      await m.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a front end that cannot start is forked again less and less often, and serves once it can", async () => {
    const dir = mkdtempSync(join(tmpdir(), "e2e-fe-backoff-"));
    const ca = makeCa(dir, "ca");
    const server = makeLeaf(ca, "server");
    const goodKey = readFileSync(server.key);
    const a = await singleMemberArgs(join(dir, "data"), "https", "http");
    const m = new Member({ name: "s1", clientPort: a.clientPort, peerPort: a.peerPort, dataDir: join(dir, "data") }, [...a.args, `--cert-file=${server.cert}`, `--key-file=${server.key}`, "--experimental-front-ends=1"], {}, "etcetera");
    const ep = `https://127.0.0.1:${a.clientPort}`;
    const tlsCtl = async (args: string[]): Promise<string> => {
      const r = await etcdctl(ep, [`--cacert=${ca.cert}`, ...args]);
      return `${r.code} ${r.stdout.trim()}`;
    };
    try {
      const { pid, first } = await startWithOneFrontEnd(m);
      expect(await tlsCtl(["put", "feb/a", "1"])).toBe("0 OK");
      // Every front end reads the key file when it starts: one that is not a key makes every start fail.
      writeFileSync(server.key, "not a key\n");
      process.kill(first, "SIGKILL");
      const delays = (): number[] =>
        m.log
          .split("\n")
          .filter((l) => l.includes("front end exited before it listened"))
          .map((l) => (JSON.parse(l.slice(l.indexOf("{"))) as { reforkInMs: number }).reforkInMs);
      await eventually(async () => (delays().length >= 4 ? true : undefined), 30_000, "four failed starts");
      // Each failed start in a row doubles the wait before the next: 100 ms after the kill (the
      // first exit, of a front end that had served for less than 10 s) and 200 after the first
      // failed start, or from 100 if the killed one had served for longer (a slow machine).
      const d = delays().slice(0, 4);
      expect([100, 200]).toContain(d[0]);
      expect(d).toEqual([d[0]!, d[0]! * 2, d[0]! * 4, d[0]! * 8]);
      writeFileSync(server.key, goodKey);
      await eventually(async () => (childrenOf(pid).length === 1 && m.log.split("front end serving the client URLs").length === 3 ? true : undefined), 30_000, "a front end serving again");
      expect(await tlsCtl(["get", "feb/a", "--print-value-only"])).toBe("0 1");
    } finally {
      await m.kill("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a three-member cluster with front ends serves writes, reads and watches on every member", async () => {
    const cluster = await started({ size: 3, extraArgs: FRONT_ENDS, target: "etcetera" });
    const client = new Etcd3({ hosts: cluster.members.map((m) => m.clientUrl) });
    try {
      const watcher = await client.watch().prefix("f3/").create();
      const seen: string[] = [];
      watcher.on("put", (kv: IKeyValue) => seen.push(kv.key.toString()));
      for (const [i, m] of cluster.members.entries()) expect(await ctl(m.endpoint, ["put", `f3/${i}`, String(i)])).toBe("0 OK ");
      for (const m of cluster.members) expect(await ctl(m.endpoint, ["get", "--prefix", "f3/", "--print-value-only"])).toBe("0 0\n1\n2 ");
      await eventually(async () => (seen.length >= 3 ? true : undefined), 10_000, "watch events");
      expect(seen).toEqual(["f3/0", "f3/1", "f3/2"]);
      await watcher.cancel();
    } finally {
      client.close();
    }
  });
});
