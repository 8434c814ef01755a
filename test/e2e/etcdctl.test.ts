/**
 * Debian's etcdctl (3.4) against a real single-member server process. Expected outputs are etcd's:
 * run with E2E_TARGET=etcd to check the expectations against real etcd.
 */
import { spawn } from "node:child_process";
import { existsSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, ETCDCTL, etcdctl, eventually, sleep } from "./harness.js";

let cluster: Cluster;
let ep: string;

async function ctl(...args: string[]) {
  return etcdctl(ep, args);
}
async function ok(...args: string[]): Promise<string> {
  const r = await etcdctl(ep, args);
  if (r.code !== 0) throw new Error(`etcdctl ${args.join(" ")} failed (${r.code}): ${r.stderr}\n${cluster.logs()}`);
  return r.stdout;
}
function b64(s: string): string {
  return Buffer.from(s).toString("base64");
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  ep = cluster.endpoints;
});
afterAll(async () => {
  await cluster?.destroy();
});

describe("etcdctl kv", () => {
  it("put and get", async () => {
    expect(await ok("put", "foo", "bar")).toBe("OK\n");
    expect(await ok("get", "foo")).toBe("foo\nbar\n");
    expect(await ok("get", "missing")).toBe("");
  });

  it("get --prefix, --keys-only, --print-value-only, --limit, --from-key", async () => {
    await ok("put", "pfx/a", "1");
    await ok("put", "pfx/b", "2");
    await ok("put", "pfx/c", "3");
    await ok("put", "pfy", "4");
    expect(await ok("get", "pfx/", "--prefix")).toBe("pfx/a\n1\npfx/b\n2\npfx/c\n3\n");
    expect(await ok("get", "pfx/", "--prefix", "--keys-only")).toBe("pfx/a\n\npfx/b\n\npfx/c\n\n");
    expect(await ok("get", "pfx/", "--prefix", "--print-value-only")).toBe("1\n2\n3\n");
    expect(await ok("get", "pfx/", "--prefix", "--limit=2")).toBe("pfx/a\n1\npfx/b\n2\n");
    expect(await ok("get", "pfx/c", "--from-key", "--keys-only")).toBe("pfx/c\n\npfy\n\n");
    // A range [key, end).
    expect(await ok("get", "pfx/a", "pfx/c", "--print-value-only")).toBe("1\n2\n");
  });

  it("get --sort-by and --order", async () => {
    await ok("put", "s/1", "c");
    await ok("put", "s/2", "a");
    await ok("put", "s/3", "b");
    expect(await ok("get", "s/", "--prefix", "--sort-by=VALUE", "--order=ASCEND", "--print-value-only")).toBe("a\nb\nc\n");
    expect(await ok("get", "s/", "--prefix", "--sort-by=KEY", "--order=DESCEND", "--keys-only")).toBe("s/3\n\ns/2\n\ns/1\n\n");
    expect(await ok("get", "s/", "--prefix", "--sort-by=MODIFY", "--order=DESCEND", "--limit=1", "--keys-only")).toBe("s/3\n\n");
    expect(await ok("get", "s/", "--prefix", "--sort-by=CREATE", "--order=ASCEND", "--keys-only")).toBe("s/1\n\ns/2\n\ns/3\n\n");
  });

  it("get -w json carries header and revisions; --rev reads the past", async () => {
    await ok("put", "rev/k", "v1");
    const first = JSON.parse(await ok("get", "rev/k", "-w", "json"));
    const rev1 = first.kvs[0].mod_revision as number;
    expect(first.kvs[0]).toMatchObject({ key: b64("rev/k"), value: b64("v1"), version: 1, create_revision: rev1 });
    expect(first.header.revision).toBe(rev1);
    expect(first.header.cluster_id).toBeGreaterThan(0);
    expect(first.header.member_id).toBeGreaterThan(0);
    expect(first.header.raft_term).toBeGreaterThan(0);
    expect(first.count).toBe(1);

    await ok("put", "rev/k", "v2");
    const second = JSON.parse(await ok("get", "rev/k", "-w", "json"));
    expect(second.kvs[0]).toMatchObject({ value: b64("v2"), version: 2, create_revision: rev1 });
    expect(second.kvs[0].mod_revision).toBe(rev1 + 1);
    expect(await ok("get", "rev/k", `--rev=${rev1}`, "--print-value-only")).toBe("v1\n");
  });

  it("del with --prev-kv and --prefix", async () => {
    await ok("put", "d/1", "x");
    await ok("put", "d/2", "y");
    await ok("put", "d3", "z");
    expect(await ok("del", "d3", "--prev-kv")).toBe("1\nd3\nz\n");
    expect(await ok("del", "d/", "--prefix")).toBe("2\n");
    expect(await ok("del", "d/", "--prefix")).toBe("0\n");
    expect(await ok("get", "d", "--prefix")).toBe("");
  });

  it("txn from stdin (non-interactive)", async () => {
    await ok("put", "t/a", "1");
    const succ = await etcdctl(ep, ["txn"], 'value("t/a") = "1"\n\nput t/b yes\nget t/a\n\nput t/b no\n\n');
    expect(succ.code).toBe(0);
    expect(succ.stdout).toBe("SUCCESS\n\nOK\n\nt/a\n1\n");
    const fail = await etcdctl(ep, ["txn"], 'mod("t/a") = "0"\n\nput t/c yes\n\nput t/c no\n\n');
    expect(fail.stdout).toBe("FAILURE\n\nOK\n");
    expect(await ok("get", "t/", "--prefix", "--print-value-only")).toBe("1\nyes\nno\n");
  });

  it("txn interactive (-i) reads the same script from stdin", async () => {
    const r = await etcdctl(ep, ["txn", "-i"], 'version("t/a") = "1"\n\nput t/i 1\n\n\n');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("SUCCESS");
    expect(await ok("get", "t/i", "--print-value-only")).toBe("1\n");
  });

  it("errors come back with etcd's messages", async () => {
    const empty = await ctl("put", "", "x");
    expect(empty.code).not.toBe(0);
    expect(empty.stderr).toContain("etcdserver: key is not provided");
    const future = await ctl("get", "foo", "--rev=100000000");
    expect(future.stderr).toContain("etcdserver: mvcc: required revision is a future revision");
    const noLease = await ctl("put", "k", "v", "--lease=1234abcd");
    expect(noLease.stderr).toContain("etcdserver: requested lease not found");
  });
});

describe("etcdctl watch", () => {
  it("watch --prefix --prev-kv sees writes made while it runs", async () => {
    await ok("put", "w/a", "old");
    const child = spawn(ETCDCTL, [`--endpoints=${ep}`, "watch", "w/", "--prefix", "--prev-kv"], {
      env: { ...process.env, ETCDCTL_API: "3" },
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    try {
      await sleep(500); // the watch is registered before the writes that follow
      await ok("put", "w/a", "new");
      await ok("put", "w/b", "1");
      await ok("del", "w/b");
      const expected = "PUT\nw/a\nold\nw/a\nnew\nPUT\nw/b\n1\nDELETE\nw/b\n1\nw/b\n\n";
      await eventually(async () => (out.length >= expected.length ? true : undefined), 10_000, "watch output");
      expect(out).toBe(expected);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("watch --rev replays history from a past revision", async () => {
    const r1 = JSON.parse(await ok("put", "wr/k", "1", "-w", "json")).header.revision as number;
    await ok("put", "wr/k", "2");
    const child = spawn(ETCDCTL, [`--endpoints=${ep}`, "watch", "wr/k", `--rev=${r1}`], {
      env: { ...process.env, ETCDCTL_API: "3" },
    });
    let out = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    try {
      const expected = "PUT\nwr/k\n1\nPUT\nwr/k\n2\n";
      await eventually(async () => (out.length >= expected.length ? true : undefined), 10_000, "watch replay");
      expect(out).toBe(expected);
    } finally {
      child.kill("SIGKILL");
    }
  });
});

describe("etcdctl lease", () => {
  it("grant, attach, timetolive --keys, keep-alive, list, revoke", async () => {
    const granted = await ok("lease", "grant", "60");
    const m = /^lease ([0-9a-f]+) granted with TTL\(60s\)\n$/.exec(granted);
    expect(m).not.toBeNull();
    const id = m![1]!;
    expect(await ok("put", "lk", "v", `--lease=${id}`)).toBe("OK\n");
    const ttl = await ok("lease", "timetolive", id, "--keys");
    expect(ttl).toMatch(new RegExp(`^lease ${id} granted with TTL\\(60s\\), remaining\\((59|60)s\\), attached keys\\(\\[lk\\]\\)\\n$`));
    expect(await ok("lease", "list")).toContain(`${id}\n`);
    expect(await ok("lease", "keep-alive", "--once", id)).toBe(`lease ${id} keepalived with TTL(60)\n`);
    expect(await ok("lease", "revoke", id)).toBe(`lease ${id} revoked\n`);
    expect(await ok("get", "lk")).toBe("");
    expect(await ok("lease", "timetolive", id)).toBe(`lease ${id} already expired\n`);
  });

  it("an expired lease deletes its keys", async () => {
    const id = /lease ([0-9a-f]+) granted/.exec(await ok("lease", "grant", "2"))![1]!;
    await ok("put", "short", "lived", `--lease=${id}`);
    expect(await ok("get", "short", "--print-value-only")).toBe("lived\n");
    await eventually(async () => ((await ok("get", "short")) === "" ? true : undefined), 15_000, "lease expiry");
  });
});

describe("etcdctl maintenance", () => {
  it("endpoint status, health, hashkv; member list", async () => {
    const status = JSON.parse(await ok("endpoint", "status", "-w", "json"));
    expect(status).toHaveLength(1);
    const s = status[0].Status;
    expect(s.leader).toBe(s.header.member_id);
    expect(s.raftIndex).toBeGreaterThan(0);
    expect(s.dbSize).toBeGreaterThan(0);
    const health = await ctl("endpoint", "health");
    expect(health.code).toBe(0);
    // etcdctl 3.4 prints the health line on stderr.
    expect(health.stdout + health.stderr).toMatch(/127\.0\.0\.1:\d+ is healthy: successfully committed proposal: took = /);
    expect(await ok("endpoint", "hashkv")).toMatch(/^127\.0\.0\.1:\d+, \d+\n$/);
    const members = await ok("member", "list");
    expect(members).toMatch(/^[0-9a-f]+, started, n1, http:\/\/127\.0\.0\.1:\d+, http:\/\/127\.0\.0\.1:\d+, false\n$/);
  });

  it("compaction (--physical) makes old revisions unreadable", async () => {
    const r1 = JSON.parse(await ok("put", "c/k", "1", "-w", "json")).header.revision as number;
    await ok("put", "c/k", "2");
    expect(await ok("compaction", String(r1 + 1), "--physical")).toBe(`compacted revision ${r1 + 1}\n`);
    const old = await ctl("get", "c/k", `--rev=${r1}`);
    expect(old.code).not.toBe(0);
    expect(old.stderr).toContain("etcdserver: mvcc: required revision has been compacted");
    expect(await ok("get", "c/k", "--print-value-only")).toBe("2\n");
  });

  it("defrag, snapshot save, alarm list", async () => {
    expect(await ok("defrag")).toMatch(/^Finished defragmenting etcd member\[127\.0\.0\.1:\d+\]\n$/);
    const file = join(cluster.dir, "snap.db");
    const r = await ctl("snapshot", "save", file);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe(`Snapshot saved at ${file}\n`);
    expect(existsSync(file) && statSync(file).size > 0).toBe(true);
    rmSync(file);
    expect(await ok("alarm", "list")).toBe("");
  });
});

describe("etcdctl lock and elect", () => {
  it("lock runs a command holding the lock", async () => {
    const r = await ctl("lock", "mylock", "echo", "held");
    expect(r.code).toBe(0);
    // With a command, etcdctl prints only the command's output, run while the lock is held.
    expect(r.stdout).toBe("held\n");
  });

  it("elect proclaims a leader that elect --listen observes", async () => {
    const campaigner = spawn(ETCDCTL, [`--endpoints=${ep}`, "elect", "myelection", "alice"], {
      env: { ...process.env, ETCDCTL_API: "3" },
    });
    let out = "";
    campaigner.stdout.on("data", (b: Buffer) => (out += b.toString()));
    try {
      await eventually(async () => (out.includes("alice") ? true : undefined), 10_000, "campaign");
      expect(out).toMatch(/^myelection\/[0-9a-f]+\nalice\n$/);
      const listener = spawn(ETCDCTL, [`--endpoints=${ep}`, "elect", "--listen", "myelection"], {
        env: { ...process.env, ETCDCTL_API: "3" },
      });
      let heard = "";
      listener.stdout.on("data", (b: Buffer) => (heard += b.toString()));
      try {
        await eventually(async () => (heard.includes("alice") ? true : undefined), 10_000, "observe");
        expect(heard).toMatch(/^myelection\/[0-9a-f]+\nalice\n/);
      } finally {
        listener.kill("SIGKILL");
      }
    } finally {
      campaigner.kill("SIGKILL");
    }
  });
});
