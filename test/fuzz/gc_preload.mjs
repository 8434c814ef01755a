/*
 * Test-only preload for the fuzz suites' leak checks (loaded into etcetera's server process with
 * NODE_OPTIONS=--import): on SIGUSR2 it runs two full garbage collections and prints a marker,
 * so a memory sample taken after the marker measures what the process keeps alive, not garbage
 * that happens to be uncollected. It changes no server behaviour; production never loads it.
 */
import v8 from "node:v8";
import vm from "node:vm";

v8.setFlagsFromString("--expose-gc");
const gc = vm.runInNewContext("gc");
let collections = 0;
process.on("SIGUSR2", () => {
  gc();
  gc();
  collections++;
  process.stderr.write(`fuzz-gc-done ${collections}\n`);
});
