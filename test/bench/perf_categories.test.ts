import { describe, expect, it } from "vitest";
import { breakdown, categorize, formatBreakdown, jsFileOf, OTHER, parsePerfScript, symbolOf } from "../../bench/compare/perf_categories.js";

// Three samples as `perf script -F comm,tid,time,ip,sym,dso` prints them (trimmed call chains).
const SCRIPT = `node 23656 22292.401982:     250000 cpu-clock:ppp: 
\t    7f830c17ce05 JS:*putKv file:///work/main/dist/mvcc/kv_backend.js:154:10+0x5 (/tmp/perf-23656.map)
\t         14ce0dc Builtins_JSEntryTrampoline+0x5c (/usr/bin/node)

node 23656 22292.402482:     250000 cpu-clock:ppp: 
\tffffffff8a1b2c3d pvm_irq_enable+0x1 ([kernel.kallsyms])
\tffffffff8a1b2c00 tcp_sendmsg+0x10 ([kernel.kallsyms])
\tffffffff8a1b2b00 sock_write_iter+0x20 ([kernel.kallsyms])
\tffffffff8a1b2a00 do_syscall_64+0x30 ([kernel.kallsyms])
\t          7f1234 __GI___libc_write+0x4c (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t          805618 node::StreamBase::WriteBuffer+0x208 (/usr/bin/node)

libuv-worker 23660 22292.402982:     250000 cpu-clock:ppp: 
\tffffffff8a000000 clear_page_erms+0x1 ([kernel.kallsyms])
\tffffffff8a000100 exc_page_fault+0x1 ([kernel.kallsyms])
\t          7f0001 _int_malloc+0xda9 (/usr/lib/x86_64-linux-gnu/libc.so.6)
`;

describe("perf script samples", () => {
  it("parses comm, thread id and frames, innermost first", () => {
    const s = parsePerfScript(SCRIPT);
    expect(s.map((x) => [x.comm, x.tid, x.frames.length])).toEqual([
      ["node", 23656, 2],
      ["node", 23656, 6],
      ["libuv-worker", 23660, 3],
    ]);
    expect(symbolOf(s[0]!.frames[0]!)).toBe("JS:*putKv file:///work/main/dist/mvcc/kv_backend.js:154:10");
    expect(symbolOf(s[1]!.frames[0]!)).toBe("pvm_irq_enable");
  });

  it("charges a system call or a page fault to the kernel, not to the frame above it", () => {
    const [js, write, fault] = parsePerfScript(SCRIPT);
    expect(categorize(js!)).toBe("JavaScript (optimized and baseline code)");
    expect(categorize(write!)).toBe("kernel: socket writes");
    expect(categorize(fault!)).toBe("kernel: page faults");
    expect(categorize({ comm: "node", tid: 1, frames: ["abc+0x1 (/lib/unknown.so)"] })).toBe(OTHER);
  });

  it("turns shares into µs per put from the thread's measured CPU", () => {
    const b = breakdown(parsePerfScript(SCRIPT).filter((s) => s.tid === 23656));
    expect(b.samples).toBe(2);
    const lines = formatBreakdown(b, 40, 5);
    expect(lines).toContain("   50.0%   20.00 µs  kernel: socket writes");
    expect(lines).toContain("   50.0%   20.00 µs  JavaScript (optimized and baseline code)");
    // The socket write has no JavaScript frame in its (trimmed) chain; the put's sample is kv_backend's.
    expect(lines).toContain("   50.0%   20.00 µs  dist/mvcc/kv_backend.js");
    expect(lines).toContain("   50.0%   20.00 µs  (no JavaScript frame)");
  });

  it("names a JavaScript frame's file as dist/…, a package's or node's own", () => {
    expect(jsFileOf("JS:*putKv file:///work/main/dist/mvcc/kv_backend.js:154:10")).toBe("dist/mvcc/kv_backend.js");
    expect(jsFileOf("JS:*BTree.set /work/main/node_modules/sorted-btree/b+tree.js:248:36")).toBe("sorted-btree/b+tree.js");
    expect(jsFileOf("JS:*nextTick node:internal/process/task_queues:103:18")).toBe("node:internal/process/task_queues");
    expect(jsFileOf("Builtins_LoadIC")).toBeUndefined();
  });
});
