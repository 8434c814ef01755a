/**
 * A violation written for people: the explanation as text, the minimal history as JSON (replayable
 * through the checker), and an HTML page with an SVG timeline — one lane per client, one bar per
 * operation from invocation to return (dashed to the right edge when the outcome is unknown), the
 * longest linearizable order numbered on the bars.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describeOp, describeResult, type Operation } from "./history.js";
import type { Violation } from "./linearizability.js";

function escapeXml(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

/** An SVG timeline of `ops`; `order` numbers the operations of a (partial) linearization. */
export function timelineSvg(ops: readonly Operation[], order: readonly Operation[] = []): string {
  const clients = [...new Set(ops.map((o) => o.clientId))].sort((a, b) => a - b);
  const t0 = Math.min(...ops.map((o) => o.call));
  const finite = ops.map((o) => (o.ret === Infinity ? o.call : o.ret));
  const t1 = Math.max(...finite, t0 + 1);
  const laneH = 56;
  const left = 70;
  const width = 1100;
  const right = 40;
  const span = t1 - t0;
  const x = (t: number) => left + ((t - t0) / span) * (width - left - right - 120);
  const rank = new Map(order.map((o, i) => [o.id, i + 1]));
  const parts: string[] = [];
  const height = clients.length * laneH + 40;
  parts.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="monospace" font-size="11">`);
  clients.forEach((c, lane) => {
    const y = 20 + lane * laneH;
    parts.push(`<text x="4" y="${y + 22}">client ${c}</text>`);
    parts.push(`<line x1="${left}" y1="${y + laneH - 4}" x2="${width - right}" y2="${y + laneH - 4}" stroke="#eee"/>`);
  });
  for (const o of ops) {
    const lane = clients.indexOf(o.clientId);
    const y = 20 + lane * laneH;
    const x0 = x(o.call);
    const unknown = o.ret === Infinity;
    const x1 = unknown ? width - right : Math.max(x(o.ret), x0 + 3);
    const linearized = rank.get(o.id);
    const fill = unknown ? "#fde68a" : linearized !== undefined ? "#bbf7d0" : "#fecaca";
    const dash = unknown ? ` stroke-dasharray="4 3"` : "";
    const title = `#${o.id} ${describeOp(o.op)} ⇒ ${describeResult(o.result)}`;
    parts.push(`<g><title>${escapeXml(title)}</title>`);
    parts.push(`<rect x="${x0}" y="${y + 4}" width="${x1 - x0}" height="22" fill="${fill}" stroke="#333"${dash}/>`);
    const label = `${linearized !== undefined ? `${linearized}. ` : ""}${describeOp(o.op)}`;
    parts.push(`<text x="${x0 + 3}" y="${y + 19}">${escapeXml(label)}</text>`);
    parts.push(`<text x="${x0 + 3}" y="${y + 40}" fill="#555">${escapeXml(describeResult(o.result))}</text></g>`);
  }
  parts.push(`</svg>`);
  return parts.join("\n");
}

export function violationHtml(v: Violation): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>${escapeXml(v.kind)}</title></head>
<body style="font-family: sans-serif">
<h1>${escapeXml(v.kind)}${v.key !== undefined ? ` on key ${escapeXml(v.key)}` : ""}</h1>
<p>Green: in the longest linearizable order found (numbered). Red: could not be placed. Yellow, dashed: outcome unknown (possibly applied).</p>
${timelineSvg(v.minimal, v.longestPrefix ?? [])}
<pre>${escapeXml(v.explanation)}</pre>
</body></html>`;
}

export interface ViolationFiles {
  text: string;
  json: string;
  html: string;
}

/** Writes `<dir>/<name>.txt|.json|.html` for each violation; returns their paths. */
export function writeViolations(dir: string, violations: readonly Violation[], name = "violation"): ViolationFiles[] {
  mkdirSync(dir, { recursive: true });
  return violations.map((v, i) => {
    const base = join(dir, `${name}-${i + 1}`);
    const files = { text: `${base}.txt`, json: `${base}.json`, html: `${base}.html` };
    writeFileSync(files.text, v.explanation + "\n");
    // Infinity is not JSON: unknown returns are written as null.
    writeFileSync(files.json, JSON.stringify(v.minimal.map((o) => ({ ...o, ret: o.ret === Infinity ? null : o.ret })), null, 1));
    writeFileSync(files.html, violationHtml(v));
    return files;
  });
}
