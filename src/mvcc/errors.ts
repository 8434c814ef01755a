/**
 * Errors the kv store reports to clients, with etcd's exact messages and the
 * gRPC status code the server must send for each (etcd v3rpc/rpctypes).
 */

/** gRPC status codes used below (values of grpc.status). */
export enum GrpcCode {
  INVALID_ARGUMENT = 3,
  NOT_FOUND = 5,
  FAILED_PRECONDITION = 9,
  OUT_OF_RANGE = 11,
}

/** Base class: every client-visible mvcc error carries its gRPC code. */
export class MvccError extends Error {
  readonly code: GrpcCode;
  constructor(message: string, code: GrpcCode) {
    super(message);
    this.name = new.target.name;
    this.code = code;
  }
}

export class ErrCompacted extends MvccError {
  constructor() {
    super('etcdserver: mvcc: required revision has been compacted', GrpcCode.OUT_OF_RANGE);
  }
}

export class ErrFutureRev extends MvccError {
  constructor() {
    super('etcdserver: mvcc: required revision is a future revision', GrpcCode.OUT_OF_RANGE);
  }
}

export class ErrDuplicateKey extends MvccError {
  constructor() {
    super('etcdserver: duplicate key given in txn request', GrpcCode.INVALID_ARGUMENT);
  }
}

export class ErrEmptyKey extends MvccError {
  constructor() {
    super('etcdserver: key is not provided', GrpcCode.INVALID_ARGUMENT);
  }
}

export class ErrKeyNotFound extends MvccError {
  constructor() {
    super('etcdserver: key not found', GrpcCode.INVALID_ARGUMENT);
  }
}

export class ErrValueProvided extends MvccError {
  constructor() {
    super('etcdserver: value is provided', GrpcCode.INVALID_ARGUMENT);
  }
}

export class ErrLeaseProvided extends MvccError {
  constructor() {
    super('etcdserver: lease is provided', GrpcCode.INVALID_ARGUMENT);
  }
}

export class ErrLeaseNotFound extends MvccError {
  constructor() {
    super('etcdserver: requested lease not found', GrpcCode.NOT_FOUND);
  }
}

/** Watch create on an empty key range (etcd: mvcc.ErrEmptyWatcherRange; server replies created+canceled). */
export class ErrEmptyWatcherRange extends MvccError {
  constructor() {
    super('mvcc: watcher range is empty', GrpcCode.INVALID_ARGUMENT);
  }
}

/** Watch create with a client-chosen id already in use on the stream. */
export class ErrWatcherDuplicateID extends MvccError {
  constructor() {
    super('mvcc: duplicate watch ID provided on the WatchStream', GrpcCode.INVALID_ARGUMENT);
  }
}

/** The store was closed; programming error in the caller. */
export class ErrClosed extends Error {
  constructor() {
    super('mvcc: store is closed');
    this.name = 'ErrClosed';
  }
}

/** Invariant violation: the store's state is not what its own rules allow. Never caught. */
export function invariant(cond: unknown, what: string): asserts cond {
  if (!cond) throw new Error(`mvcc invariant violated: ${what}`);
}
