/**
 * Invariant checks for the Raft core. A violated invariant means the log, the term or the commit
 * index can no longer be trusted, so the only safe reaction is to stop: these throw, and the node
 * must not keep running on a state that broke one of them.
 */

export class RaftInvariantError extends Error {
  constructor(message: string) {
    super(`raft invariant violated: ${message}`);
    this.name = "RaftInvariantError";
  }
}

export function assert(condition: boolean, message: string | (() => string)): asserts condition {
  if (!condition) {
    throw new RaftInvariantError(typeof message === "string" ? message : message());
  }
}

/** Raised for a misuse of the API by the caller (as opposed to a broken internal invariant). */
export class RaftUsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RaftUsageError";
  }
}
