/**
 * Sorts `perf script` call-chain samples of a Node.js thread into where its time went, kernel
 * included: JavaScript, V8's builtins and runtime, the collector, malloc, SQLite, and each kind
 * of system call and page fault (issue 18).
 *
 * Why not V8's own profiler: it samples from a signal handler and charges the time of a native
 * call, system calls and page faults included, to whatever frame it finds, and it sees nothing
 * below V8. On the leader at 1,000 clients it put 19% of the main thread in socket `writeBuffer`
 * and 19% in "(garbage collector)"; perf on the same load measures ~8% and ~10%
 * (bench/results/perf-main-2026-12-08.txt). The cost model takes its shares from this.
 */

/** One sample: its frames, innermost first, each "symbol (dso)" as perf script prints them. */
export interface PerfSample {
  comm: string;
  tid: number;
  frames: string[];
}

/**
 * Parses `perf script` text (samples separated by blank lines; a header line
 * "comm tid [cpu] time: period event:" then one "addr symbol+off (dso)" line per frame).
 */
export function parsePerfScript(text: string): PerfSample[] {
  const out: PerfSample[] = [];
  for (const block of text.split(/\n\s*\n/)) {
    const lines = block.split("\n").filter((l) => l.trim() !== "");
    const head = lines[0];
    if (head === undefined) continue;
    // The comm may hold spaces; the tid is the first all-digit field after it ("comm pid/tid" or "comm tid").
    const m = /^\s*(.*?)\s+(?:\d+\/)?(\d+)\s+(?:\[\d+\]\s+)?[\d.]+:/.exec(head);
    if (m === null) continue;
    const frames: string[] = [];
    for (const l of lines.slice(1)) {
      const t = l.trim();
      const sp = t.indexOf(" ");
      if (sp > 0) frames.push(t.slice(sp + 1));
    }
    out.push({ comm: m[1] as string, tid: Number(m[2]), frames });
  }
  return out;
}

/** A frame's symbol without its offset and DSO. */
export function symbolOf(frame: string): string {
  const dso = frame.lastIndexOf(" (");
  const sym = dso >= 0 ? frame.slice(0, dso) : frame;
  return sym.replace(/\+0x[0-9a-f]+$/, "");
}

const isKernel = (f: string): boolean => f.endsWith("([kernel.kallsyms])");

/** Categories, first match wins, checked against the whole chain (innermost first). */
const RULES: ReadonlyArray<readonly [string, (syms: string[], frames: string[]) => boolean]> = [
  ["kernel: page faults", (s) => s.some((x) => x === "exc_page_fault" || x === "asm_exc_page_fault")],
  ["kernel: socket writes", (s) => s.includes("sock_write_iter") || s.includes("__sys_sendto") || s.includes("____sys_sendmsg")],
  ["kernel: socket reads", (s) => s.includes("sock_read_iter") || s.includes("sock_recvmsg")],
  ["kernel: file writes", (s) => s.includes("__x64_sys_pwrite64") || s.includes("__x64_sys_pwritev") || s.includes("ksys_write")],
  ["kernel: epoll", (s) => s.some((x) => x.startsWith("__x64_sys_epoll"))],
  ["kernel: futex", (s) => s.includes("__x64_sys_futex")],
  ["kernel: other system calls", (s) => s.includes("do_syscall_64")],
  ["kernel: interrupts and scheduling", (_s, f) => f.length > 0 && isKernel(f[0] as string)],
  ["garbage collector", (s) => s.some((x) => /^v8::internal::(Heap::|Scavenger|ScavengerCollector|MarkCompactCollector|MinorMarkCompact|IncrementalMarking|ConcurrentMarking|GCTracer|MemoryAllocator|ArrayBufferSweeper)/.test(x))],
  ["SQLite", (s) => s.some((x) => /^sqlite3|^pcache1|^btree|^balance|^pager|^memjrnl|^subjournal|^walIndex|^walWrite|^vdbe/i.test(x) || x.includes("Statement::JS_run") || x.includes("Statement::JS_get"))],
  ["V8 compiler", (s) => s.some((x) => x.startsWith("v8::internal::compiler::") || x.startsWith("v8::internal::maglev::") || x.startsWith("v8::internal::Compiler::"))],
  ["malloc and free", (s) => /^(_int_malloc|_int_free|malloc|free|cfree|calloc|realloc|__libc_malloc|__libc_calloc|__GI___libc_malloc|__GI___libc_free|__libc_calloc|unlink_chunk.*|malloc_consolidate|sysmalloc|_int_realloc|tcache_.*)$/.test(s[0] ?? "")],
  ["memcpy and memset", (s) => /^__(memmove|memcpy|memset)_/.test(s[0] ?? "")],
  ["JavaScript (optimized and baseline code)", (s) => (s[0] ?? "").startsWith("JS:")],
  ["V8 builtins and runtime", (s) => /^(Builtins_|v8::|Runtime_)/.test(s[0] ?? "")],
  ["node and libuv", (s) => /^(node::|uv_|uv__)/.test(s[0] ?? "")],
];

export const OTHER = "other";

export function categorize(sample: PerfSample): string {
  const syms = sample.frames.map(symbolOf);
  for (const [name, rule] of RULES) if (rule(syms, sample.frames)) return name;
  return OTHER;
}

export interface Breakdown {
  samples: number;
  /** Category → sample count. */
  categories: Map<string, number>;
  /** Innermost symbol → sample count (self time). */
  self: Map<string, number>;
  /**
   * Source file of the innermost JavaScript frame → sample count: what V8's builtins, the
   * collector's allocation-triggered work, malloc and system calls were done for. Samples with
   * no JavaScript frame (the event loop's own work, a collection started by a timer) are "(no
   * JavaScript frame)".
   */
  files: Map<string, number>;
}

/** The file of a perf-basic-prof JavaScript frame ("JS:*name file:///…/dist/x.js:1:2"), shortened to dist/… or node:…. */
export function jsFileOf(symbol: string): string | undefined {
  if (!symbol.startsWith("JS:")) return undefined;
  const m = /\s(\S+?)(?::\d+){0,2}$/.exec(symbol);
  if (m === null) return "(anonymous)";
  const url = (m[1] as string).replace(/^file:\/\//, "");
  const nm = url.lastIndexOf("node_modules/");
  if (nm >= 0) return url.slice(nm + "node_modules/".length);
  const dist = url.lastIndexOf("/dist/");
  return dist >= 0 ? url.slice(dist + 1) : url;
}

export function breakdown(samples: PerfSample[]): Breakdown {
  const categories = new Map<string, number>();
  const self = new Map<string, number>();
  const files = new Map<string, number>();
  for (const s of samples) {
    const c = categorize(s);
    categories.set(c, (categories.get(c) ?? 0) + 1);
    const top = s.frames[0] === undefined ? "(no frames)" : symbolOf(s.frames[0]).replace("file:///", "/");
    self.set(top, (self.get(top) ?? 0) + 1);
    let file = "(no JavaScript frame)";
    for (const f of s.frames) {
      const js = jsFileOf(symbolOf(f));
      if (js !== undefined) {
        file = js;
        break;
      }
    }
    files.set(file, (files.get(file) ?? 0) + 1);
  }
  return { samples: samples.length, categories, self, files };
}

/** Lines of "share  µs/put  name", largest first; `usPerPut` is the thread's CPU per put from /proc. */
export function formatBreakdown(b: Breakdown, usPerPut: number, topSelf: number): string[] {
  const lines: string[] = [];
  const row = (n: number, name: string) =>
    `  ${((100 * n) / Math.max(1, b.samples)).toFixed(1).padStart(5)}%  ${((usPerPut * n) / Math.max(1, b.samples)).toFixed(2).padStart(6)} µs  ${name}`;
  lines.push(` by category (${b.samples} samples):`);
  for (const [k, v] of [...b.categories].sort((x, y) => y[1] - x[1])) lines.push(row(v, k));
  lines.push(" by innermost symbol (self):");
  for (const [k, v] of [...b.self].sort((x, y) => y[1] - x[1]).slice(0, topSelf)) lines.push(row(v, k));
  lines.push(" by the innermost JavaScript frame's file (all the work done under it):");
  for (const [k, v] of [...b.files].sort((x, y) => y[1] - x[1]).slice(0, topSelf)) lines.push(row(v, k));
  return lines;
}
