/**
 * The comparison as a markdown table (for the README) and as an SVG chart a person can look
 * at. Pure: summaries in, text out.
 */
import type { CpuSummary, RowSummary, TargetSummary } from "./summary.js";

const MB = 1024 * 1024;

function fmtInt(v: number): string {
  return Number.isFinite(v) ? Math.round(v).toLocaleString("en-US") : "—";
}

function fmtMs(v: number): string {
  if (!Number.isFinite(v)) return "—";
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/** "avg / p99" in ms, as both tables print latency. */
function fmtLatency(avgMs: number, p99Ms: number): string {
  return `${fmtMs(avgMs)} / ${fmtMs(p99Ms)}`;
}

function fmtRatio(v: number | undefined): string {
  return v === undefined || !Number.isFinite(v) ? "—" : `${v.toFixed(2)}×`;
}

function fmtRss(bytes: readonly number[]): string {
  return bytes.length === 0 ? "—" : bytes.map((b) => (Number.isFinite(b) ? (b / MB).toFixed(0) : "—")).join(" / ");
}

/** A cell for a target: its value, or why there is none. */
function cell(t: TargetSummary | undefined, value: (t: TargetSummary) => string): string {
  if (t === undefined) return "not run";
  if (t.rounds === 0) return `failed${t.firstError !== undefined ? ` (${oneLine(t.firstError).slice(0, 60)})` : ""}`;
  return value(t);
}

function oneLine(s: string): string {
  return s.replace(/\s+/g, " ").replace(/\|/g, "/").trim();
}

/** One row of a markdown table: `| a | b |`, each cell padded by a space. */
function markdownRow(cells: readonly string[]): string {
  return ["", ...cells.map((c) => ` ${c} `), ""].join("|");
}

/** Median req/s, then (n; lowest–highest round) when there is more than one round. */
function rpsCell(t: TargetSummary): string {
  return t.rounds > 1 ? `${fmtInt(t.rps)} (${t.rounds}; ${fmtInt(t.rpsMin)}–${fmtInt(t.rpsMax)})` : `${fmtInt(t.rps)} (${t.rounds})`;
}

/**
 * The README's table. n, beside each req/s, is the number of rounds the target's medians in that
 * row are taken over (its avg / p99 and RSS cells too); the caller checks they are all equal
 * (assertEqualRounds) before publishing.
 */
export function markdownTable(rows: readonly RowSummary[]): string {
  const head = [
    "| Benchmark | etcd req/s (n; range) | etcetera req/s (n; range) | req/s ratio | etcd avg / p99 ms | etcetera avg / p99 ms | p99 ratio | etcd peak RSS MB | etcetera peak RSS MB |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  const body = rows.map((r) =>
    markdownRow([
      r.title,
      cell(r.etcd, rpsCell),
      cell(r.etcetera, rpsCell),
      fmtRatio(r.rpsRatio),
      cell(r.etcd, (t) => fmtLatency(t.avgMs, t.p99Ms)),
      cell(r.etcetera, (t) => fmtLatency(t.avgMs, t.p99Ms)),
      fmtRatio(r.p99Ratio),
      cell(r.etcd, (t) => fmtRss(t.peakRssBytes)),
      cell(r.etcetera, (t) => fmtRss(t.peakRssBytes)),
    ]),
  );
  return [...head, ...body].join("\n") + "\n";
}

function fmtUs(v: number): string {
  return Number.isFinite(v) ? (v >= 10 ? v.toFixed(0) : v.toFixed(1)) : "—";
}

/** "leader µs (main / busiest thread comm) · busier follower µs · Σ all members µs". */
function cpuCell(c: CpuSummary | undefined): string {
  if (c === undefined) return "—";
  return `${fmtUs(c.leaderUs)} (${fmtUs(c.leaderMainUs)} / ${oneLine(c.leaderBusiestComm)} ${fmtUs(c.leaderBusiestUs)}) · ${fmtUs(c.followerUs)} · Σ ${fmtUs(c.clusterUs)}`;
}

/**
 * The second table: per row the cold run (req/s, avg / p99, ratio) and the CPU per request of
 * the warm run (and of the cold run), per target: the leader process, its main thread, its
 * busiest thread (with its comm), and the busier follower's process.
 */
export function coldCpuTable(rows: readonly RowSummary[]): string {
  const head = [
    "| Benchmark | etcd cold req/s | etcetera cold req/s | cold ratio | etcd cold avg / p99 ms | etcetera cold avg / p99 ms | etcd CPU µs/req warm: leader (main / busiest thread) · busier follower · Σ members | etcetera CPU µs/req warm | leader CPU ratio | etcd CPU µs/req cold | etcetera CPU µs/req cold |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
  ];
  const body = rows.map((r) =>
    markdownRow([
      r.title,
      cell(r.etcd, (t) => (t.cold !== undefined ? fmtInt(t.cold.rps) : "—")),
      cell(r.etcetera, (t) => (t.cold !== undefined ? fmtInt(t.cold.rps) : "—")),
      fmtRatio(r.coldRpsRatio),
      cell(r.etcd, (t) => (t.cold !== undefined ? fmtLatency(t.cold.avgMs, t.cold.p99Ms) : "—")),
      cell(r.etcetera, (t) => (t.cold !== undefined ? fmtLatency(t.cold.avgMs, t.cold.p99Ms) : "—")),
      cell(r.etcd, (t) => cpuCell(t.cpu)),
      cell(r.etcetera, (t) => cpuCell(t.cpu)),
      fmtRatio(r.leaderCpuRatio),
      cell(r.etcd, (t) => cpuCell(t.cold?.cpu)),
      cell(r.etcetera, (t) => cpuCell(t.cold?.cpu)),
    ]),
  );
  return [...head, ...body].join("\n") + "\n";
}

function esc(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

const COLORS = { etcd: "#4e79a7", etcetera: "#f28e2b" } as const;

/**
 * Two panels (requests/s, p99 latency); per benchmark a pair of bars, etcd and etcetera,
 * scaled within the benchmark (the rows differ by orders of magnitude), values printed.
 */
export function svgChart(rows: readonly RowSummary[], subtitle: string): string {
  const labelW = 330;
  const barW = 300;
  const panelW = labelW + barW + 150;
  const rowH = 44;
  const top = 70;
  const height = top + rows.length * rowH + 40;
  const width = panelW * 2 + 20;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="white"/>`,
    `<text x="10" y="22" font-size="16" font-weight="bold">etcetera vs etcd — 3 members, same machine, same run</text>`,
    `<text x="10" y="40" fill="#555">${esc(subtitle)}</text>`,
    `<rect x="10" y="48" width="12" height="12" fill="${COLORS.etcd}"/><text x="26" y="58">etcd</text>`,
    `<rect x="70" y="48" width="12" height="12" fill="${COLORS.etcetera}"/><text x="86" y="58">etcetera</text>`,
  ];
  const panels: Array<{ title: string; pick: (t: TargetSummary) => number; fmt: (v: number) => string; ratio: (r: RowSummary) => number | undefined }> = [
    { title: "requests/s (higher is better)", pick: (t) => t.rps, fmt: fmtInt, ratio: (r) => r.rpsRatio },
    { title: "p99 latency ms (lower is better)", pick: (t) => t.p99Ms, fmt: fmtMs, ratio: (r) => r.p99Ratio },
  ];
  panels.forEach((p, pi) => {
    const x0 = 10 + pi * (panelW + 10);
    out.push(`<text x="${x0 + labelW}" y="${top - 4}" font-weight="bold">${esc(p.title)}</text>`);
    rows.forEach((r, ri) => {
      const y = top + ri * rowH;
      out.push(`<text x="${x0}" y="${y + 20}">${esc(r.title)}</text>`);
      const vals = (["etcd", "etcetera"] as const).map((t) => {
        const s = r[t];
        return s !== undefined && s.rounds > 0 ? p.pick(s) : NaN;
      });
      const max = Math.max(...vals.filter(Number.isFinite), 0);
      (["etcd", "etcetera"] as const).forEach((t, ti) => {
        const v = vals[ti] as number;
        const by = y + 4 + ti * 17;
        const w = Number.isFinite(v) && max > 0 ? Math.max(1, (v / max) * barW) : 0;
        out.push(`<rect x="${x0 + labelW}" y="${by}" width="${w.toFixed(1)}" height="14" fill="${COLORS[t]}"/>`);
        const label = Number.isFinite(v) ? p.fmt(v) : r[t] === undefined ? "not run" : "failed";
        out.push(`<text x="${x0 + labelW + w + 4}" y="${by + 11}">${esc(label)}</text>`);
      });
      const ratio = p.ratio(r);
      if (ratio !== undefined && Number.isFinite(ratio)) {
        out.push(`<text x="${x0 + labelW + barW + 80}" y="${y + 20}" font-weight="bold">${esc(fmtRatio(ratio))}</text>`);
      }
    });
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}
