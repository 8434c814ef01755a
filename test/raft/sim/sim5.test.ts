import { describe } from "vitest";
import { registerSeeds } from "./run.js";

// 200 seeds of a 5-node cluster under faults (see sim.ts for the checks).
describe("raft simulator, 5 nodes", () => registerSeeds(5, 200, 100001));
