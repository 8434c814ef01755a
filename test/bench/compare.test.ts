import { describe, expect, it } from "vitest";
import { rowEndpoints, seedMatrix } from "../../bench/compare/matrix.js";
import { markdownTable, svgChart } from "../../bench/compare/render.js";
import { START_ATTEMPTS_MAX, withStartRetries } from "../../bench/compare/attempts.js";
import { type RunRecord, assertEqualRounds, median, summarizeRows } from "../../bench/compare/summary.js";
import { leastSquares, solveLinear } from "../../bench/memory/fit.js";

const MB = 1024 * 1024;

function run(p: Partial<RunRecord> & Pick<RunRecord, "row" | "target" | "round">): RunRecord {
  return { ok: true, rps: 100, avgMs: 1, p99Ms: 2, peakRssBytes: [50 * MB, 40 * MB, 40 * MB], ...p };
}

describe("compare summary", () => {
  it("median", () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(median([4, 1, 2, 3])).toBe(2.5);
    expect(median([])).toBeNaN();
  });

  it("medians per target over successful rounds and ratios etcetera/etcd", () => {
    const rows = [{ id: "r", title: "Row" }];
    const runs = [
      run({ row: "r", target: "etcd", round: 1, rps: 1000, p99Ms: 10 }),
      run({ row: "r", target: "etcd", round: 2, rps: 1200, p99Ms: 12 }),
      run({ row: "r", target: "etcd", round: 3, rps: 800, p99Ms: 30 }),
      run({ row: "r", target: "etcetera", round: 1, rps: 1500, p99Ms: 6, peakRssBytes: [30 * MB, 20 * MB, 20 * MB] }),
      run({ row: "r", target: "etcetera", round: 2, ok: false, error: "boom" }),
      run({ row: "r", target: "etcetera", round: 3, rps: 500, p99Ms: 8, peakRssBytes: [40 * MB, 20 * MB, 20 * MB] }),
    ];
    const [s] = summarizeRows(rows, runs);
    expect(s!.etcd).toMatchObject({ rounds: 3, failed: 0, rps: 1000, rpsMin: 800, rpsMax: 1200, p99Ms: 12 });
    expect(s!.etcetera).toMatchObject({ rounds: 2, failed: 1, rps: 1000, p99Ms: 7, firstError: "boom" });
    expect(s!.etcetera!.peakRssBytes[0]).toBe(35 * MB);
    expect(s!.rpsRatio).toBeCloseTo(1, 12);
    expect(s!.p99Ratio).toBeCloseTo(7 / 12, 12);
    expect(s!.rssRatio).toBeCloseTo(35 / 50, 12);
  });

  it("a target that always failed has no ratio and shows as failed", () => {
    const rows = [{ id: "r", title: "Row" }];
    const [s] = summarizeRows(rows, [run({ row: "r", target: "etcd", round: 1 }), run({ row: "r", target: "etcetera", round: 1, ok: false, error: "server.js | did not start" })]);
    expect(s!.rpsRatio).toBeUndefined();
    const md = markdownTable([s!]);
    expect(md).toContain("failed (server.js / did not start)");
    expect(md.split("\n")[2]!.split("|")).toHaveLength(11); // 9 columns, no stray pipes
  });

  it("markdown table: one line per row, etcd's and etcetera's numbers and the ratio", () => {
    const rows = seedMatrix({ quick: false }).slice(0, 2).map((r) => ({ id: r.id, title: r.title }));
    const runs = rows.flatMap((r) => [
      run({ row: r.id, target: "etcd", round: 1, rps: 44_341, avgMs: 22, p99Ms: 40 }),
      run({ row: r.id, target: "etcetera", round: 1, rps: 50_000, avgMs: 20, p99Ms: 30 }),
    ]);
    const md = markdownTable(summarizeRows(rows, runs));
    const lines = md.trim().split("\n");
    expect(lines).toHaveLength(4);
    expect(lines[2]).toContain("| 44,341 (1) | 50,000 (1) | 1.13× | 22.0 / 40.0 | 20.0 / 30.0 | 0.75× | 50 / 40 / 40 | 50 / 40 / 40 |");
  });

  it("SVG chart is well-formed and carries every row, value and ratio", () => {
    const rows = [{ id: "a", title: "put <1x1> & co" }, { id: "b", title: "range" }];
    const runs = [
      run({ row: "a", target: "etcd", round: 1, rps: 600 }),
      run({ row: "a", target: "etcetera", round: 1, rps: 900 }),
      run({ row: "b", target: "etcd", round: 1, rps: 30_000 }),
      run({ row: "b", target: "etcetera", round: 1, ok: false, error: "x" }),
    ];
    const svg = svgChart(summarizeRows(rows, runs), "sub & title");
    expect(svg.startsWith("<svg")).toBe(true);
    expect(svg.trim().endsWith("</svg>")).toBe(true);
    expect(svg).toContain("put &lt;1x1&gt; &amp; co");
    expect(svg).toContain("sub &amp; title");
    expect(svg).toContain(">1.50×<");
    expect(svg).toContain(">30,000<");
    expect(svg).toContain(">failed<");
    expect(svg).not.toMatch(/NaN|undefined/);
    // balanced tags: every opened <text> closes
    expect((svg.match(/<text/g) ?? []).length).toBe((svg.match(/<\/text>/g) ?? []).length);
  });

  it("seed matrix: issue 8's rows at full and quick size", () => {
    const full = seedMatrix({ quick: false });
    expect(full.map((r) => r.id)).toEqual(["put-1x1-leader", "put-100x1000-leader", "put-100x1000-all", "range-l-1x1", "range-l-1x1-follower", "range-s-1x1", "range-l-100x1000", "range-s-100x1000"]);
    // A one-connection range goes to the same role in both targets, not to whichever member is first.
    expect(full.filter((r) => r.args.includes("--conns=1") && r.args.includes("range")).map((r) => r.firstEndpoint)).toEqual(["leader", "follower", "leader"]);
    expect(full[0]!.args).toEqual(expect.arrayContaining(["--target-leader", "--conns=1", "--clients=1", "put", "--total=10000", "--val-size=256", "--key-size=8"]));
    expect(full[2]!.args).not.toContain("--target-leader");
    expect(full[1]!.total).toBe(100_000);
    expect(seedMatrix({ quick: true })[1]!.total).toBe(10_000);
  });

  it("orders a row's endpoints by the member its one connection is to reach", () => {
    const eps = ["a:1", "b:2", "c:3"];
    expect(rowEndpoints(eps, 2, undefined)).toEqual(eps);
    expect(rowEndpoints(eps, 2, "leader")).toEqual(["c:3", "a:1", "b:2"]);
    expect(rowEndpoints(eps, 2, "follower")).toEqual(["a:1", "b:2", "c:3"]);
    expect(rowEndpoints(eps, 0, "follower")).toEqual(["b:2", "a:1", "c:3"]);
    expect(() => rowEndpoints(eps, -1, "leader")).toThrow(/leader -1/);
  });
});

describe("compare: equal rounds, n per cell, start retries", () => {
  const rows = [{ id: "a", title: "A" }, { id: "b", title: "B" }];
  const full = (target: "etcd" | "etcetera", row: string) => [1, 2, 3].map((round) => run({ row, target, round }));

  it("a table whose cells hold equal round counts passes and shows n beside each req/s", () => {
    const summary = summarizeRows(rows, [...full("etcd", "a"), ...full("etcetera", "a"), ...full("etcd", "b"), ...full("etcetera", "b")]);
    expect(assertEqualRounds(summary)).toBe(3);
    const md = markdownTable(summary);
    expect(md).toContain("| etcd req/s (n; range) | etcetera req/s (n; range) |");
    expect(md).toContain("| 100 (3; 100–100) | 100 (3; 100–100) |");
  });

  it("refuses a table where one cell holds fewer rounds (the 2-of-3 table of 2026-11-30)", () => {
    const runs = [...full("etcd", "a"), ...full("etcetera", "a"), ...full("etcd", "b"), ...full("etcetera", "b").slice(0, 2), run({ row: "b", target: "etcetera", round: 3, ok: false, error: "cluster did not start\nmore" })];
    const summary = summarizeRows(rows, runs);
    expect(() => assertEqualRounds(summary)).toThrow(/unequal round counts \(most cells hold 3\): b etcetera n=2 \(1 failed: cluster did not start\)$/);
    expect(markdownTable(summary)).toContain("| 100 (2; 100–100) |");
  });

  it("refuses a table where every run failed", () => {
    const summary = summarizeRows(rows.slice(0, 1), [run({ row: "a", target: "etcd", round: 1, ok: false, error: "x" })]);
    expect(() => assertEqualRounds(summary)).toThrow(/every run failed: x/);
  });

  it("a failed start is retried on a fresh cluster up to the bound; the record says how many attempts", async () => {
    const calls: number[] = [];
    const retried: number[] = [];
    const startFail = (n: number): RunRecord => ({ row: "a", target: "etcetera", round: 3, ok: false, startFailed: true, error: `duplicate url ${n}\nlog` });
    const ok = await withStartRetries(
      async (n) => (calls.push(n), n < 3 ? startFail(n) : run({ row: "a", target: "etcetera", round: 3 })),
      3,
      (_rec, n) => retried.push(n),
    );
    expect(calls).toEqual([1, 2, 3]);
    expect(retried).toEqual([1, 2]);
    expect(ok).toMatchObject({ ok: true, attempts: 3, earlierStartErrors: ["duplicate url 1", "duplicate url 2"] });

    const gaveUp = await withStartRetries(async (n) => startFail(n), START_ATTEMPTS_MAX);
    expect(gaveUp).toMatchObject({ ok: false, startFailed: true, attempts: START_ATTEMPTS_MAX });
    expect(START_ATTEMPTS_MAX).toBeGreaterThan(1);
  });

  it("a run that started and then failed is a result, not retried", async () => {
    let calls = 0;
    const rec = await withStartRetries(async () => (calls++, { row: "a", target: "etcd", round: 1, ok: false, error: "member died" }));
    expect(calls).toBe(1);
    expect(rec).toMatchObject({ ok: false, attempts: 1 });
  });
});

describe("least squares (watch memory model)", () => {
  it("solves a linear system", () => {
    expect(solveLinear([[2, 1], [1, 3]], [3, 5]).map((v) => Number(v.toFixed(12)))).toEqual([0.8, 1.4]);
    expect(() => solveLinear([[1, 2], [2, 4]], [1, 2])).toThrow(/singular/);
  });

  it("recovers etcd-like coefficients from exact data, and a close fit from noisy data", () => {
    const truth = [40e6, 17_000, 18_000, 350];
    const design = [
      [10, 10, 10], [100, 100, 100], [1000, 1000, 1000],
      [10, 1000, 1000], [10, 10000, 10000], [10, 10, 100_000],
      [10, 10, 1_000_000], [500, 500, 10_000], [1000, 10_000, 1_000_000],
    ];
    const model = (x: number[]) => truth[0]! + x.reduce((s, v, j) => s + v * truth[j + 1]!, 0);
    const exact = leastSquares(design, design.map(model));
    exact.coefficients.forEach((c, j) => expect(c).toBeCloseTo(truth[j]!, 3));
    expect(exact.r2).toBeCloseTo(1, 9);

    const seed = Number(process.env.SEED ?? 42);
    console.log(`least-squares noise SEED=${seed}`);
    let state = seed >>> 0;
    const rand = () => ((state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32 - 0.5) * 2;
    const noisy = leastSquares(design, design.map((x) => model(x) + rand() * 1e6));
    expect(Math.abs(noisy.coefficients[3]! - 350) / 350).toBeLessThan(0.05);
    expect(noisy.r2).toBeGreaterThan(0.99);
    expect(noisy.residuals).toHaveLength(design.length);
  });

  it("refuses a design that cannot separate the variables", () => {
    expect(() => leastSquares([[1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4]], [1, 2, 3, 4])).toThrow(/singular/);
    expect(() => leastSquares([[1, 2, 3]], [1])).toThrow(/at least 4/);
  });
});
