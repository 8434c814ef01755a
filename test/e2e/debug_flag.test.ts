/**
 * etcd 3.4's deprecated `--debug`: accepted, warned about on stderr before the first log line in
 * etcd's words, and with zap it leaves the level at --log-level (etcd sets capnslog's global
 * level from it, zap's from --log-level alone). E2E_TARGET=etcd runs the same expectations against
 * real etcd 3.4.
 */
import { afterEach, describe, expect, it } from "vitest";
import { Cluster, etcdctl } from "./harness.js";

const DEBUG_NOTICE = "[WARNING] Deprecated '--debug' flag is set to true (use '--log-level=debug' instead";
const INCONSISTENT_INFO = "[WARNING] Deprecated '--debug' flag is set to true with inconsistent '--log-level=info' flag";
const CAPNSLOG_NOTICE = "[WARNING] Deprecated '--logger=capnslog' flag is set; use '--logger=zap' flag instead";

let cluster: Cluster | undefined;

afterEach(async () => {
  await cluster?.destroy();
  cluster = undefined;
});

async function serving(extraArgs: string[]): Promise<string> {
  cluster = await Cluster.create({ size: 1, extraArgs });
  await cluster.start();
  const m = cluster.members[0]!;
  const put = await etcdctl(m.endpoint, ["put", "k", "v"]);
  expect(put.code, put.stderr).toBe(0);
  const get = await etcdctl(m.endpoint, ["get", "k", "--print-value-only"]);
  expect(get.stdout.trim()).toBe("v");
  return m.log;
}

describe("--debug (deprecated in etcd 3.4)", () => {
  it("with --logger=zap: accepted, both warnings before the first log line, and no debug lines", async () => {
    const log = await serving(["--debug", "--logger=zap"]);
    const lines = log.split("\n");
    expect(lines[0]).toBe(DEBUG_NOTICE);
    expect(lines[1]).toBe(INCONSISTENT_INFO);
    expect(log).not.toContain(CAPNSLOG_NOTICE);
    expect(log).toContain('"level":"info"');
    expect(log).not.toContain('"level":"debug"');
  });

  it("with --logger=capnslog: accepted, the debug warnings then the capnslog one", async () => {
    const log = await serving(["--debug", "--logger=capnslog"]);
    expect(log.split("\n").slice(0, 3)).toEqual([DEBUG_NOTICE, INCONSISTENT_INFO, CAPNSLOG_NOTICE]);
    expect(log).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} I \| /m);
  });

  it("with --log-level=debug: only the deprecation warning", async () => {
    const log = await serving(["--debug", "--logger=zap", "--log-level=debug"]);
    expect(log.split("\n")[0]).toBe(DEBUG_NOTICE);
    expect(log).not.toContain("inconsistent");
  });
});
