/**
 * etcdctl's snapshot status printers as src/snapshot_cli.ts reproduces them, on values whose
 * rounding differs between JavaScript and Go (go-humanize rounds tenths half up, then Go's %.0f
 * rounds a tie to even). The e2e suite (test/e2e/snapshot_cli.test.ts) compares whole outputs with
 * etcdctl's on real files; this pins the corners a small test file does not reach.
 */
import { describe, expect, it } from "vitest";
import { formatStatus, humanizeBytes } from "../../src/snapshot_cli.js";

describe("humanizeBytes is go-humanize's Bytes", () => {
  it.each([
    [0, "0 B"],
    [9, "9 B"],
    [10, "10 B"],
    [999, "999 B"],
    [1000, "1.0 kB"],
    [9949, "9.9 kB"],
    [9950, "10 kB"],
    [20480, "20 kB"],
    [21500, "22 kB"],
    [22500, "22 kB"],
    [2125824, "2.1 MB"],
    [999_999_999, "1000 MB"],
    [4_294_967_296, "4.3 GB"],
  ])("%d bytes → %s", (n, text) => {
    expect(humanizeBytes(n)).toBe(text);
  });
});

describe("formatStatus prints etcdctl's formats", () => {
  const s = { hash: 0x85a1d99a, revision: 15, totalKey: 20, totalSize: 20480 };
  it("simple, json, fields and table", () => {
    expect(formatStatus(s, "simple")).toBe("85a1d99a, 15, 20, 20 kB\n");
    expect(formatStatus(s, "json")).toBe('{"hash":2241976730,"revision":15,"totalKey":20,"totalSize":20480}\n');
    expect(formatStatus(s, "fields")).toBe('"Hash" : 2241976730\n"Revision" : 15\n"Keys" : 20\n"Size" : 20480\n');
    expect(formatStatus(s, "table")).toBe(
      [
        "+----------+----------+------------+------------+",
        "|   HASH   | REVISION | TOTAL KEYS | TOTAL SIZE |",
        "+----------+----------+------------+------------+",
        "| 85a1d99a |       15 |         20 |      20 kB |",
        "+----------+----------+------------+------------+",
        "",
      ].join("\n"),
    );
  });
});
