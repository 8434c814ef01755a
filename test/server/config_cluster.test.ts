/** The command lines of `scripts/cluster.ts` and `docker-compose.yml` are valid etcetera configs. */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { buildClusterMembers, CLUSTER_PORTS, parseScriptArgs } from "../../scripts/cluster.js";
import { parseConfig } from "../../src/server/config.js";
import { initialClusterInfo } from "../../src/server/member.js";

describe("scripts/cluster.ts", () => {
  const members = buildClusterMembers({ dataRoot: "cluster.etcd", extraArgs: ["--log-level", "debug"], token: "etcd-cluster-1" });

  it("builds three members on etcd's Procfile ports that parse as one cluster", () => {
    expect(members.map((m) => m.name)).toEqual(["infra1", "infra2", "infra3"]);
    expect(CLUSTER_PORTS.map((p) => [p.client, p.peer])).toEqual([[2379, 2380], [22379, 22380], [32379, 32380]]);
    const configs = members.map((m) => parseConfig(m.args, {}));
    configs.forEach((c, i) => {
      expect(c.name).toBe(`infra${i + 1}`);
      expect(c.dataDir).toBe(path.join("cluster.etcd", `infra${i + 1}.etcd`));
      expect(c.listenClientUrls).toEqual([`http://127.0.0.1:${CLUSTER_PORTS[i]!.client}`]);
      expect(c.advertiseClientUrls).toEqual(c.listenClientUrls);
      expect(c.listenPeerUrls).toEqual([`http://127.0.0.1:${CLUSTER_PORTS[i]!.peer}`]);
      expect(c.initialClusterToken).toBe("etcd-cluster-1");
      expect(c.logLevel).toBe("debug");
      expect(c.warnings).toEqual([]);
    });
    const infos = configs.map((c) => initialClusterInfo(c));
    expect(new Set(infos.map((i) => i.clusterId)).size).toBe(1);
    expect(new Set(infos.map((i) => i.local.id)).size).toBe(3);
  });

  it("parses its own arguments", () => {
    expect(parseScriptArgs([])).toEqual({ dataRoot: "cluster.etcd", fresh: false, server: "dist/server.js", extraArgs: [] });
    expect(parseScriptArgs(["--fresh", "--data-root", "/tmp/x", "--server", "s.js", "--", "--snapshot-count", "10"])).toEqual({
      dataRoot: "/tmp/x",
      fresh: true,
      server: "s.js",
      extraArgs: ["--snapshot-count", "10"],
    });
    expect(() => parseScriptArgs(["--bogus"])).toThrow(/unknown argument --bogus/);
    expect(() => parseScriptArgs(["--server"])).toThrow(/needs a value/);
  });

  it("runs members in the foreground with prefixed output and stops them all on SIGTERM", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "etcetera-cluster-"));
    try {
      const fake = path.join(dir, "fake-server.mjs");
      // Stands in for dist/server.js: says who it is, then waits for SIGTERM. The handler goes in
      // before "ready" is printed: a SIGTERM sent on seeing "ready" once arrived before it, and the
      // default action killed the member (CI: "infra3 | exited (SIGTERM)").
      writeFileSync(
        fake,
        `const name = process.argv[process.argv.indexOf("--name") + 1];
         process.on("SIGTERM", () => { console.error("bye " + name); process.exit(0); });
         console.log("ready " + name);
         setInterval(() => {}, 1000);`,
      );
      const child = spawn(process.execPath, ["--import", "tsx", "scripts/cluster.ts", "--server", fake, "--data-root", path.join(dir, "data")], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (d: Buffer) => (out += d.toString()));
      child.stderr.on("data", (d: Buffer) => (out += d.toString()));
      const deadline = Date.now() + 30_000;
      while (!["infra1", "infra2", "infra3"].every((n) => out.includes(`${n} | ready ${n}`))) {
        if (Date.now() > deadline || child.exitCode !== null) throw new Error(`members did not start:\n${out}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const code = await new Promise<number | null>((resolve) => {
        child.on("exit", (c) => resolve(c));
        child.kill("SIGTERM");
      });
      expect(code).toBe(0);
      for (const n of ["infra1", "infra2", "infra3"]) {
        expect(out).toContain(`${n} | bye ${n}`);
        expect(out).toContain(`${n} | exited (code 0)`);
      }
      expect(out).toContain("endpoint status -w table");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("docker-compose.yml", () => {
  it("starts n1..n3 with --peers and command lines that parse as one cluster", () => {
    const text = readFileSync("docker-compose.yml", "utf8");
    const commands = [...text.matchAll(/^ {4}command:\n((?: {6}- .*\n)+)/gm)].map((m) => m[1]!.split("\n").filter((l) => l !== "").map((l) => l.replace(/^ {6}- /, "")));
    expect(commands).toHaveLength(3);
    const env = { ETCD_INITIAL_CLUSTER_TOKEN: "etcetera-compose", ETCD_LOG_LEVEL: "info" };
    const configs = commands.map((argv) => parseConfig(argv, env));
    expect(configs.map((c) => c.name)).toEqual(["n1", "n2", "n3"]);
    for (const c of configs) {
      expect(c.initialClusterText).toBe("n1=http://n1:2380,n2=http://n2:2380,n3=http://n3:2380");
      expect(c.listenClientUrls).toEqual(["http://0.0.0.0:2379"]);
      expect(c.advertiseClientUrls).toEqual([`http://${c.name}:2379`]);
      expect(c.listenPeerUrls).toEqual(["http://0.0.0.0:2380"]);
      expect(c.dataDir).toBe(`/data/${c.name}.etcd`);
      expect(c.warnings).toEqual([]);
    }
    expect(new Set(configs.map((c) => initialClusterInfo(c).clusterId)).size).toBe(1);
  });
});
