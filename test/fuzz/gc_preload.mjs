/*
 * Test-only preload for the fuzz suites' leak checks (loaded into etcetera's server process with
 * NODE_OPTIONS=--import): on SIGUSR2 it runs two full garbage collections and prints a marker,
 * so a memory sample taken after the marker measures what the process keeps alive, not garbage
 * that happens to be uncollected. The marker carries the committed size of V8's new space (both
 * semi-spaces): V8 grows it under load from 1 MB to 32 MB and keeps it after the collections, so a
 * leak check subtracts it from RSS (a step of exactly 16 MiB between two samples was the young
 * generation doubling, not retention). It changes no server behaviour; production never loads it.
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
  const newSpace = v8.getHeapSpaceStatistics().find((space) => space.space_name === "new_space");
  process.stderr.write(`fuzz-gc-done ${collections} new-space ${newSpace?.space_size ?? 0}\n`);
});
