import { describe } from "vitest";
import { registerSeeds } from "./run.js";

// 300 seeds of a 3-node cluster under faults (see sim.ts for the checks).
describe("raft simulator, 3 nodes", () => registerSeeds(3, 300, 1));
