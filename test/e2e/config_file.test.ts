/**
 * A member started with --config-file (etcd's YAML file) on both targets: it serves with the
 * file's settings, ignores the other flags and ETCD_* variables, serves no JSON gateway unless the
 * file sets enable-grpc-gateway, and refuses a file it cannot use with etcd's words and exit code.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ETCD_BIN } from "../binaries.js";
import { reservePort } from "../ports.js";
import { etcdctl, Member, oneMemberYamlLines, SERVER_JS, TARGET_ETCD, type MemberSpec } from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "e2e-config-file-"));
const members: Member[] = [];
afterAll(async () => {
  for (const m of members) await m.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

function memberYaml(s: MemberSpec, extra = ""): string {
  return [
    ...oneMemberYamlLines(s),
    "initial-cluster-token: 'config-file-test'",
    "initial-cluster-state: 'new'",
    "logger: zap",
    "log-outputs: [stderr]",
    "snapshot-count: 10000",
    // Keys of etcd's sample file at their defaults: etcd reads them, etcetera accepts them at rest.
    "proxy: 'off'",
    "discovery-fallback: 'proxy'",
    extra,
  ].join("\n");
}

/** POST /v3/kv/range through the JSON gateway: its status and body. */
async function gatewayRange(m: Member, key: string): Promise<{ status: number; body: string }> {
  const r = await fetch(`${m.clientUrl}/v3/kv/range`, { method: "POST", body: JSON.stringify({ key: Buffer.from(key).toString("base64") }) });
  return { status: r.status, body: await r.text() };
}

/** Runs the target with `args` until it exits: its exit code and output. */
function runToExit(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; output: string }> {
  const [cmd, argv] = TARGET_ETCD ? [ETCD_BIN, args] : [process.execPath, [SERVER_JS, ...args]];
  return new Promise((res) => {
    const p = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    p.stdout.on("data", (b: Buffer) => (output += b.toString()));
    p.stderr.on("data", (b: Buffer) => (output += b.toString()));
    const timer = setTimeout(() => p.kill("SIGKILL"), 20_000);
    p.on("exit", (code) => {
      clearTimeout(timer);
      res({ code, output });
    });
  });
}

describe("--config-file", () => {
  it("a member serves with the file's settings, ignoring the other flags, and the JSON gateway only when the file enables it", async () => {
    const spec: MemberSpec = { name: "from-file", clientPort: await reservePort(), peerPort: await reservePort(), dataDir: join(dir, "m1") };
    const path = join(dir, "m1.yml");
    writeFileSync(path, memberYaml(spec));
    const m = new Member(spec, ["--config-file", path, "--name=from-flag"], { ETCD_INITIAL_CLUSTER_TOKEN: "from-env" });
    members.push(m);
    m.start();
    await m.waitReady();
    expect(m.log).toContain("loaded server configuration, other configuration command line flags and environment variables will be ignored if provided");

    const put = await etcdctl(m.endpoint, ["put", "k", "v1"]);
    expect(put.code, put.stderr).toBe(0);
    const list = await etcdctl(m.endpoint, ["member", "list"]);
    expect(list.stdout).toContain(`, started, from-file, http://127.0.0.1:${spec.peerPort}, http://127.0.0.1:${spec.clientPort}`);
    // etcd's file mode serves no gateway unless asked: Go's mux answers the path.
    expect(await gatewayRange(m, "k")).toEqual({ status: 404, body: "404 page not found\n" });

    await m.kill("SIGTERM");
    writeFileSync(path, memberYaml(spec, "enable-grpc-gateway: true"));
    m.start();
    await m.waitReady();
    const on = await gatewayRange(m, "k");
    expect(on.status).toBe(200);
    const kvs = (JSON.parse(on.body) as { kvs: Array<{ value: string }> }).kvs;
    expect(kvs.map((kv) => Buffer.from(kv.value, "base64").toString())).toEqual(["v1"]);
  });

  it("a value of the wrong type is refused with encoding/json's words, exit 1", async () => {
    const path = join(dir, "bad.yml");
    writeFileSync(path, `name: bad\ndata-dir: ${join(dir, "bad")}\nheartbeat-interval: "100"\n`);
    const r = await runToExit(["--config-file", path]);
    expect(r.code, r.output).toBe(1);
    expect(r.output).toContain("error verifying flags, error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go struct field configYAML.heartbeat-interval of type uint. See 'etcd --help'.");
  });

  it("a missing file (from ETCD_CONFIG_FILE) is refused with Go's open error, exit 1", async () => {
    const path = join(dir, "missing.yml");
    const r = await runToExit([], { ETCD_CONFIG_FILE: path });
    expect(r.code, r.output).toBe(1);
    expect(r.output).toContain(`error verifying flags, open ${path}: no such file or directory. See 'etcd --help'.`);
  });
});
