import { describe, expect, it } from "vitest";
import { UsageError, parseArgs, parseDurationMs } from "../../bench/benchmark/flags.js";

describe("benchmark flags", () => {
  it("parses etcd's published put command with etcd's defaults for the rest", () => {
    const p = parseArgs(
      ["--endpoints=a:1,b:2", "--target-leader", "--conns=100", "--clients=1000", "put", "--key-size=8", "--sequential-keys", "--total=100000", "--val-size=256"],
      2,
    );
    expect(p.command).toBe("put");
    expect(p.global).toMatchObject({ endpoints: ["a:1", "b:2"], conns: 100, clients: 1000, targetLeader: true, workers: 2, json: false, transport: "h2" });
    expect(p.flags).toMatchObject({ "key-size": 8, "val-size": 256, total: 100000, "sequential-keys": true, "key-space-size": 1, "compact-index-delta": 1000, rate: 0 });
  });

  it("accepts space-separated values, global flags after the command, and explicit booleans", () => {
    const p = parseArgs(["range", "foo", "zoo", "--consistency", "s", "--total", "5", "--conns", "3", "--precise=true", "--workers=4"], 8);
    expect(p.args).toEqual(["foo", "zoo"]);
    expect(p.flags).toMatchObject({ consistency: "s", total: 5 });
    expect(p.global).toMatchObject({ conns: 3, precise: true, workers: 4 });
  });

  it("--workers=0 means the number of cores; --output=json means --json", () => {
    const p = parseArgs(["--workers=0", "--output=json", "lease-keepalive"], 6);
    expect(p.global.workers).toBe(6);
    expect(p.global.json).toBe(true);
  });

  it("parses Go durations", () => {
    expect(parseDurationMs("0")).toBe(0);
    expect(parseDurationMs("5s")).toBe(5000);
    expect(parseDurationMs("1m30s")).toBe(90_000);
    expect(parseDurationMs("250ms")).toBe(250);
    expect(parseDurationMs("1.5h")).toBe(5_400_000);
    expect(() => parseDurationMs("5")).toThrow(UsageError);
    expect(() => parseDurationMs("5x")).toThrow(UsageError);
    expect(parseArgs(["--dial-timeout=2s", "put", "--compact-interval=5m"], 1)).toMatchObject({
      global: { dialTimeoutMs: 2000 },
      flags: { "compact-interval": 300_000 },
    });
  });

  it("rejects what etcd's tool rejects", () => {
    const bad: string[][] = [
      [],
      ["nosuchcommand"],
      ["put", "--nosuchflag=1"],
      ["put", "--total=abc"],
      ["put", "--key-space-size=0"],
      ["range"],
      ["range", "a", "b", "c"],
      ["range", "a", "--consistency=x"],
      ["txn-put", "--txn-ops=5", "--key-space-size=2"],
      ["stm", "--isolation=q"],
      ["stm", "--stm-locker=lock-client"],
      ["--conns=-1", "put"],
      ["--transport=udp", "put"],
      ["put", "--total"],
    ];
    for (const argv of bad) expect(() => parseArgs(argv, 1), argv.join(" ")).toThrow(UsageError);
  });

  it("a command flag shadows a global one of the same name only inside the command", () => {
    const p = parseArgs(["watch-get", "--streams=3", "--watchers=7"], 1);
    expect(p.flags).toMatchObject({ streams: 3, watchers: 7, events: 8 });
  });
});
