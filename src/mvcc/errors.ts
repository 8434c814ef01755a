/**
 * Errors the kv store reports to clients: a kind and etcd's exact message (api/v3rpc/rpctypes).
 * The store speaks no gRPC: the API edge maps each kind to its status code, once, in
 * src/server/errors.ts.
 */

/** What went wrong, as the API edge's status map knows it. */
export type MvccErrorKind =
  | 'compacted'
  | 'futureRev'
  | 'duplicateKey'
  | 'emptyKey'
  | 'keyNotFound'
  | 'valueProvided'
  | 'leaseProvided'
  | 'leaseNotFound'
  | 'tooManyOps'
  | 'emptyWatcherRange'
  | 'watcherDuplicateId';

/** Base class of every client-visible mvcc error. */
export class MvccError extends Error {
  readonly kind: MvccErrorKind;
  constructor(kind: MvccErrorKind, message: string) {
    super(message);
    this.name = new.target.name;
    this.kind = kind;
  }
}

export class ErrCompacted extends MvccError {
  constructor() {
    super('compacted', 'etcdserver: mvcc: required revision has been compacted');
  }
}

export class ErrFutureRev extends MvccError {
  constructor() {
    super('futureRev', 'etcdserver: mvcc: required revision is a future revision');
  }
}

export class ErrDuplicateKey extends MvccError {
  constructor() {
    super('duplicateKey', 'etcdserver: duplicate key given in txn request');
  }
}

export class ErrEmptyKey extends MvccError {
  constructor() {
    super('emptyKey', 'etcdserver: key is not provided');
  }
}

export class ErrKeyNotFound extends MvccError {
  constructor() {
    super('keyNotFound', 'etcdserver: key not found');
  }
}

export class ErrValueProvided extends MvccError {
  constructor() {
    super('valueProvided', 'etcdserver: value is provided');
  }
}

export class ErrLeaseProvided extends MvccError {
  constructor() {
    super('leaseProvided', 'etcdserver: lease is provided');
  }
}

export class ErrLeaseNotFound extends MvccError {
  constructor() {
    super('leaseNotFound', 'etcdserver: requested lease not found');
  }
}

/** Watch create on an empty key range (etcd: mvcc.ErrEmptyWatcherRange; server replies created+canceled). */
export class ErrEmptyWatcherRange extends MvccError {
  constructor() {
    super('emptyWatcherRange', 'mvcc: watcher range is empty');
  }
}

/** Watch create with a client-chosen id already in use on the stream. */
export class ErrWatcherDuplicateID extends MvccError {
  constructor() {
    super('watcherDuplicateId', 'mvcc: duplicate watch ID provided on the WatchStream');
  }
}

/** The store was closed; programming error in the caller. */
export class ErrClosed extends Error {
  constructor() {
    super('mvcc: store is closed');
    this.name = 'ErrClosed';
  }
}

/**
 * Invariant violation: the store's state is not what its own rules allow. Never caught. A check
 * on a per-put path passes its message as a function: a template literal is built whether or not
 * the check fails, and a packed revision (a heap number) costs ~0.3 µs to print (issue 18).
 */
export function invariant(cond: unknown, what: string | (() => string)): asserts cond {
  if (!cond) throw new Error(`mvcc invariant violated: ${typeof what === 'string' ? what : what()}`);
}
