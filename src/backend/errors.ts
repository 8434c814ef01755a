/** A broken backend invariant: the database can no longer be trusted, so the caller must stop. */
export function invariant(cond: unknown, what: string | (() => string)): asserts cond {
  if (!cond) throw new Error(`backend invariant violated: ${typeof what === "string" ? what : what()}`);
}
