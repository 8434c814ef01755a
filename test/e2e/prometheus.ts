/**
 * What the metrics tests need of Prometheus, small enough to read: a parser of the text
 * exposition format (families with their type, help and samples) and an evaluator of the PromQL
 * the etcd 3.4 Grafana dashboard uses, over scrapes taken by the test:
 *
 *   selectors with =, != matchers; rate(v[d]) and changes(v[d]) over the scrapes (the range
 *   covers them all); sum(...) and sum(...) by (labels); histogram_quantile(φ, ...); a binary
 *   "-" between two vectors (one-to-one on identical label sets).
 *
 * Each scrape's samples get the `instance` label Prometheus adds (the scraped host:port).
 */

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Family {
  name: string;
  type: string;
  help: string;
  samples: Sample[];
}

const SAMPLE_RE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL_RE = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

function parseValue(text: string): number {
  if (text === "+Inf") return Infinity;
  if (text === "-Inf") return -Infinity;
  return Number(text);
}

/** Parses the text exposition format; a sample's family is the one its TYPE line opened. */
export function parseExposition(text: string): Map<string, Family> {
  const families = new Map<string, Family>();
  const family = (name: string): Family => {
    let f = families.get(name);
    if (f === undefined) {
      f = { name, type: "untyped", help: "", samples: [] };
      families.set(name, f);
    }
    return f;
  };
  let current: Family | undefined;
  for (const line of text.split("\n")) {
    if (line === "") continue;
    if (line.startsWith("# HELP ")) {
      const [, name, ...help] = line.split(" ").slice(1);
      family(name!).help = help.join(" ");
      continue;
    }
    if (line.startsWith("# TYPE ")) {
      const [name, type] = line.slice(7).split(" ");
      current = family(name!);
      current.type = type!;
      continue;
    }
    if (line.startsWith("#")) continue;
    const m = SAMPLE_RE.exec(line);
    if (m === null) throw new Error(`unparsable exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? "").matchAll(LABEL_RE)) labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === "n" ? "\n" : c));
    const name = m[1]!;
    const owner = current !== undefined && (name === current.name || name.startsWith(`${current.name}_`)) ? current : family(name);
    owner.samples.push({ name, labels, value: parseValue(m[3]!) });
  }
  return families;
}

/** The label names a family's samples carry (le and quantile, the histogram's and summary's own, left out). */
export function labelNames(f: Family): string[] {
  const names = new Set<string>();
  for (const s of f.samples) for (const k of Object.keys(s.labels)) if (k !== "le" && k !== "quantile") names.add(k);
  return [...names].sort();
}

/** A histogram's bucket bounds (the `le` values, as numbers, ascending). */
export function bucketBounds(f: Family): number[] {
  const les = new Set<number>();
  for (const s of f.samples) if (s.name.endsWith("_bucket") && s.labels.le !== undefined) les.add(parseValue(s.labels.le));
  return [...les].sort((a, b) => a - b);
}

/** One scrape of one target, as Prometheus would store it. */
export interface Scrape {
  instance: string;
  atMs: number;
  samples: Sample[];
}

export function scrapeOf(instance: string, atMs: number, text: string): Scrape {
  const samples: Sample[] = [];
  for (const f of parseExposition(text).values()) for (const s of f.samples) samples.push({ ...s, labels: { ...s.labels, instance } });
  return { instance, atMs, samples };
}

export interface Element {
  labels: Record<string, string>;
  value: number;
}

// ---------------------------------------------------------------- the PromQL subset

type Node =
  | { kind: "selector"; name: string; matchers: Array<{ label: string; op: "=" | "!="; value: string }>; range: boolean }
  | { kind: "call"; fn: string; args: Node[] }
  | { kind: "number"; value: number }
  | { kind: "sum"; arg: Node; by: string[] | undefined }
  | { kind: "binary"; op: "-"; left: Node; right: Node };

const TOKEN_RE = /\s*(?:([a-zA-Z_:][a-zA-Z0-9_:]*)|([0-9]+(?:\.[0-9]+)?)|("(?:[^"\\]|\\.)*")|(\[[0-9]+[smhdw]\])|(!=|=|[(){},-]))/y;

function tokenize(q: string): string[] {
  const tokens: string[] = [];
  TOKEN_RE.lastIndex = 0;
  while (TOKEN_RE.lastIndex < q.length) {
    if (/^\s*$/.test(q.slice(TOKEN_RE.lastIndex))) break;
    const m = TOKEN_RE.exec(q);
    if (m === null) throw new Error(`cannot tokenize ${JSON.stringify(q.slice(TOKEN_RE.lastIndex))}`);
    tokens.push(m.slice(1).find((g) => g !== undefined)!);
  }
  return tokens;
}

class Parser {
  private i = 0;
  constructor(private readonly t: string[]) {}

  parse(): Node {
    const n = this.expr();
    if (this.i !== this.t.length) throw new Error(`unexpected ${this.t[this.i]}`);
    return n;
  }

  private peek(): string | undefined {
    return this.t[this.i];
  }
  private next(): string {
    const tok = this.t[this.i++];
    if (tok === undefined) throw new Error("unexpected end of query");
    return tok;
  }
  private expect(tok: string): void {
    const got = this.next();
    if (got !== tok) throw new Error(`expected ${tok}, got ${got}`);
  }

  private expr(): Node {
    let left = this.term();
    while (this.peek() === "-") {
      this.next();
      left = { kind: "binary", op: "-", left, right: this.term() };
    }
    return left;
  }

  private term(): Node {
    const tok = this.next();
    if (/^[0-9]/.test(tok)) return { kind: "number", value: Number(tok) };
    if (tok === "sum") {
      this.expect("(");
      const arg = this.expr();
      this.expect(")");
      let by: string[] | undefined;
      if (this.peek() === "by") {
        this.next();
        this.expect("(");
        by = [];
        while (this.peek() !== ")") {
          by.push(this.next());
          if (this.peek() === ",") this.next();
        }
        this.expect(")");
      }
      return { kind: "sum", arg, by };
    }
    if (this.peek() === "(") {
      this.next();
      const args: Node[] = [this.expr()];
      while (this.peek() === ",") {
        this.next();
        args.push(this.expr());
      }
      this.expect(")");
      return { kind: "call", fn: tok, args };
    }
    const matchers: Array<{ label: string; op: "=" | "!="; value: string }> = [];
    if (this.peek() === "{") {
      this.next();
      while (this.peek() !== "}") {
        const label = this.next();
        const op = this.next();
        if (op !== "=" && op !== "!=") throw new Error(`unsupported matcher ${op}`);
        matchers.push({ label, op, value: JSON.parse(this.next()) as string });
        if (this.peek() === ",") this.next();
      }
      this.expect("}");
    }
    let range = false;
    if (this.peek()?.startsWith("[") === true) {
      this.next();
      range = true;
    }
    return { kind: "selector", name: tok, matchers, range };
  }
}

export function parseQuery(q: string): Node {
  return new Parser(tokenize(q)).parse();
}

function key(labels: Record<string, string>): string {
  return JSON.stringify(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)));
}

type Series = { labels: Record<string, string>; points: Array<{ atMs: number; value: number }> };

/** Evaluates `q` at the last scrape; range functions see every scrape. Returns the result vector. */
export function evaluate(q: string, scrapes: readonly Scrape[]): Element[] {
  const root = parseQuery(q);
  const series = (sel: Extract<Node, { kind: "selector" }>): Series[] => {
    const byKey = new Map<string, Series>();
    for (const sc of scrapes) {
      for (const s of sc.samples) {
        if (s.name !== sel.name) continue;
        if (!sel.matchers.every((m) => (m.op === "=" ? (s.labels[m.label] ?? "") === m.value : (s.labels[m.label] ?? "") !== m.value))) continue;
        const labels = { ...s.labels };
        const k = key(labels);
        let ser = byKey.get(k);
        if (ser === undefined) byKey.set(k, (ser = { labels, points: [] }));
        ser.points.push({ atMs: sc.atMs, value: s.value });
      }
    }
    return [...byKey.values()];
  };
  const ev = (n: Node): Element[] => {
    switch (n.kind) {
      case "number":
        return [{ labels: {}, value: n.value }];
      case "selector": {
        if (n.range) throw new Error("a range vector needs a function");
        // An instant selector sees the newest sample of each series (the scrapes are within Prometheus' 5 m lookback).
        return series(n).map((s) => ({ labels: { ...s.labels, __name__: n.name }, value: s.points.at(-1)!.value }));
      }
      case "call": {
        if (n.fn === "rate" || n.fn === "changes") {
          const sel = n.args[0];
          if (sel?.kind !== "selector" || !sel.range) throw new Error(`${n.fn} needs a range selector`);
          const out: Element[] = [];
          for (const s of series(sel)) {
            if (n.fn === "changes") {
              let changes = 0;
              for (let i = 1; i < s.points.length; i++) if (s.points[i]!.value !== s.points[i - 1]!.value) changes++;
              out.push({ labels: s.labels, value: changes });
              continue;
            }
            if (s.points.length < 2) continue; // rate needs two samples, as Prometheus'
            let increase = 0;
            for (let i = 1; i < s.points.length; i++) {
              const d = s.points[i]!.value - s.points[i - 1]!.value;
              increase += d >= 0 ? d : s.points[i]!.value; // a counter reset
            }
            out.push({ labels: s.labels, value: increase / ((s.points.at(-1)!.atMs - s.points[0]!.atMs) / 1000) });
          }
          return out;
        }
        if (n.fn === "histogram_quantile") {
          const [phi, vec] = n.args;
          if (phi?.kind !== "number" || vec === undefined) throw new Error("histogram_quantile(φ, vector)");
          return histogramQuantile(phi.value, ev(vec));
        }
        throw new Error(`unsupported function ${n.fn}`);
      }
      case "sum": {
        const groups = new Map<string, Element>();
        for (const e of ev(n.arg)) {
          const labels: Record<string, string> = {};
          for (const l of n.by ?? []) if (e.labels[l] !== undefined) labels[l] = e.labels[l]!;
          const k = key(labels);
          const g = groups.get(k);
          if (g === undefined) groups.set(k, { labels, value: e.value });
          else g.value += e.value;
        }
        return [...groups.values()];
      }
      case "binary": {
        const right = new Map(ev(n.right).map((e) => [key(withoutName(e.labels)), e] as const));
        const out: Element[] = [];
        for (const l of ev(n.left)) {
          const r = right.get(key(withoutName(l.labels)));
          if (r !== undefined) out.push({ labels: withoutName(l.labels), value: l.value - r.value });
        }
        return out;
      }
    }
  };
  return ev(root).map((e) => ({ labels: withoutName(e.labels), value: e.value }));
}

function withoutName(labels: Record<string, string>): Record<string, string> {
  const { __name__: _, ...rest } = labels;
  return rest;
}

/** Prometheus' histogram_quantile: linear interpolation inside the bucket holding the rank. */
function histogramQuantile(phi: number, vec: Element[]): Element[] {
  const groups = new Map<string, { labels: Record<string, string>; buckets: Array<{ le: number; count: number }> }>();
  for (const e of vec) {
    const { le, ...rest } = withoutName(e.labels);
    if (le === undefined) continue;
    const k = key(rest);
    let g = groups.get(k);
    if (g === undefined) groups.set(k, (g = { labels: rest, buckets: [] }));
    g.buckets.push({ le: parseValue(le), count: e.value });
  }
  const out: Element[] = [];
  for (const g of groups.values()) {
    const b = g.buckets.sort((x, y) => x.le - y.le);
    const total = b.at(-1)?.count ?? 0;
    if (b.length < 2 || b.at(-1)!.le !== Infinity || total === 0) {
      out.push({ labels: g.labels, value: NaN });
      continue;
    }
    const rank = phi * total;
    const i = b.findIndex((x) => x.count >= rank);
    if (i === b.length - 1) {
      out.push({ labels: g.labels, value: b[b.length - 2]!.le });
      continue;
    }
    const lower = i === 0 ? 0 : b[i - 1]!.le;
    const below = i === 0 ? 0 : b[i - 1]!.count;
    const inBucket = b[i]!.count - below;
    out.push({ labels: g.labels, value: lower + (b[i]!.le - lower) * (inBucket === 0 ? 0 : (rank - below) / inBucket) });
  }
  return out;
}
