import { describe, expect, it } from "vitest";
import { analyzeTrace, functionOf } from "../../bench/compare/cold_compiles.js";

// Lines as node 20's --trace-opt --trace-deopt print them (abridged addresses).
const TRACE = [
  "[completed compiling 0x1 <JSFunction putKv (sfi = 0x2)> (target TURBOFAN) - took 0.004, 21.394, 0.069 ms]",
  "[marking dependent code 0x3 <Code TURBOFAN> (0x4 <SharedFunctionInfo putKv>) (opt id 28) for deoptimization, reason: code dependencies]",
  "[completed compiling 0x1 <JSFunction onStream (sfi = 0x5)> (target TURBOFAN) - took 0.002, 1.5, 0.01 ms]",
  "{\"level\":\"warn\",\"msg\":\"a member's own log line\"}",
  "=====cold run starts=====",
  "[bailout (kind: deopt-eager, reason: wrong map): begin. deoptimizing 0x6 <JSFunction onStream (sfi = 0x5)>, 0x7 <Code TURBOFAN>, opt id 9, bytecode offset 0",
  "[completed compiling 0x1 <JSFunction putKv (sfi = 0x2)> (target TURBOFAN) - took 0.006, 9.617, 0.075 ms]",
  "[completed compiling 0x8 <JSFunction d98 (sfi = 0x9)> (target TURBOFAN) - took 0.012, 44.782, 0.221 ms]",
].join("\n");

describe("analyzeTrace", () => {
  it("lists the run's compiles with what each function went through before the run, and the run's deopts", () => {
    const r = analyzeTrace(TRACE);
    expect(r.compiles).toEqual([
      { fn: "putKv", ms: 9.617, before: ["opt", "deopt: code dependencies"] },
      { fn: "d98", ms: 44.782, before: [] },
    ]);
    expect(r.deopts).toEqual(["onStream: wrong map"]);
  });

  it("refuses a trace without the run's start", () => {
    expect(() => analyzeTrace("[completed compiling 0x1 <JSFunction f (sfi = 0x2)> - took 0, 1, 0 ms]")).toThrow(/no run start/);
  });

  it("names the function of a line, or '?'", () => {
    expect(functionOf("x <SharedFunctionInfo BTree.get>) y")).toBe("BTree.get");
    expect(functionOf("plain")).toBe("?");
  });
});
