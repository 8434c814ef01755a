/** --logger=capnslog: the zap-shaped records written as etcd 3.4's capnslog lines. */
import { describe, expect, it } from "vitest";
import { capnslogDestination, capnslogLine, capnslogTime } from "../../src/server/log_capnslog.js";
import { componentLogger, createLogger } from "../../src/server/logger.js";

describe("capnslog lines", () => {
  it("formats time, level letter, package, message and fields as capnslog does", () => {
    const d = new Date(2026, 11, 1, 14, 5, 39, 586);
    expect(capnslogTime(d)).toBe("2026-12-01 14:05:39.586000");
    const line = capnslogLine({ level: "warn", ts: d.toISOString(), caller: "rafthttp", msg: "lost the TCP streaming connection", "peer-id": "0000000000000002", n: 3, why: "read: connection reset" });
    expect(line).toBe('2026-12-01 14:05:39.586000 W | rafthttp: lost the TCP streaming connection peer-id=0000000000000002 n=3 why="read: connection reset"\n');
    expect(capnslogLine({ level: "fatal", ts: d.toISOString(), msg: "x" })).toMatch(/ C \| etcetera: x\n$/);
    expect(capnslogLine({ level: "info", ts: d.toISOString(), caller: "embed", msg: "ready to serve client requests" })).toMatch(/^2026-12-01 14:05:39\.586000 I \| embed: ready to serve client requests\n$/);
  });

  it("passes a line that is not JSON through unchanged", () => {
    const out: string[] = [];
    capnslogDestination({ write: (s: string) => void out.push(s) }).write("not json\n");
    expect(out).toEqual(["not json\n"]);
  });

  it("rewrites what the logger writes, line by line", () => {
    const out: string[] = [];
    const logger = createLogger({ level: "debug", format: "capnslog", destination: { write: (s: string) => void out.push(s) } });
    componentLogger(logger, "etcdserver").debug({ index: 5 }, "applied");
    expect(out).toHaveLength(1);
    expect(out[0]).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} D \| etcdserver: applied index=5\n$/);
  });
});

describe("a slow request in capnslog's words", () => {
  it("is etcd 3.4's line: request \"...\" with result \"...\" took too long (...) to execute", () => {
    const d = new Date(2026, 11, 1, 14, 5, 39, 586);
    const fields = { level: "warn", ts: d.toISOString(), caller: "etcdserver", msg: "apply request took too long", took: "77.71µs", "expected-duration": "1ns" };
    expect(capnslogLine({ ...fields, prefix: "", request: 'header:<ID:7 > put:<key:"foo" value_size:3 >', response: "size:4" })).toBe(
      '2026-12-01 14:05:39.586000 W | etcdserver: request "header:<ID:7 > put:<key:\\"foo\\" value_size:3 >" with result "size:4" took too long (77.71µs) to execute\n',
    );
    expect(capnslogLine({ ...fields, prefix: "read-only range ", request: 'key:"foo" ', response: "", error: "etcdserver: mvcc: required revision has been compacted" })).toContain(
      'W | etcdserver: read-only range request "key:\\"foo\\" " with result "error:etcdserver: mvcc: required revision has been compacted" took too long (77.71µs) to execute',
    );
  });
});
