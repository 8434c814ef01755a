/**
 * The client port's HTTP access flags (etcd's Security group): --cors. Kept beside config.ts so
 * the flag table there only gains one spread.
 */
import type { FlagSpec } from "./flags.js";

export const GATEWAY_FLAG_SPECS: readonly FlagSpec[] = [
  {
    group: "Security",
    name: "cors",
    kind: "string",
    defaultValue: "*",
    usage: "Comma-separated whitelist of origins for CORS, or cross-origin resource sharing, (empty or * means allow all).",
  },
];
