/**
 * The lessor's errors with etcd's exact client-visible messages (api/v3rpc/rpctypes) and the gRPC
 * status code the transport must answer with, as a numeric `code` (grpc-js `status` values).
 */

/** gRPC status codes used here (same numbers as @grpc/grpc-js `status`). */
export const GrpcCode = {
  Unknown: 2,
  NotFound: 5,
  FailedPrecondition: 9,
  OutOfRange: 11,
} as const;
export type GrpcCodeValue = (typeof GrpcCode)[keyof typeof GrpcCode];

/** Base class: every lessor error carries the gRPC status code it maps to. */
export class LeaseError extends Error {
  constructor(
    readonly code: GrpcCodeValue,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** etcd ErrGRPCLeaseNotFound (lease.ErrLeaseNotFound): NotFound. */
export class LeaseNotFoundError extends LeaseError {
  constructor() {
    super(GrpcCode.NotFound, "etcdserver: requested lease not found");
  }
}

/** etcd ErrGRPCLeaseExist (lease.ErrLeaseExists): FailedPrecondition. */
export class LeaseExistsError extends LeaseError {
  constructor() {
    super(GrpcCode.FailedPrecondition, "etcdserver: lease already exists");
  }
}

/** etcd ErrGRPCLeaseTTLTooLarge (lease.ErrLeaseTTLTooLarge, TTL > MaxLeaseTTL): OutOfRange. */
export class LeaseTtlTooLargeError extends LeaseError {
  constructor() {
    super(GrpcCode.OutOfRange, "etcdserver: too large lease TTL");
  }
}

/**
 * etcd's lease.ErrNotPrimary: a renew reached a member that is not the leader. In etcd this never
 * reaches a client: the server forwards the keep-alive to the leader (and retries). Were it to leak,
 * etcd's togRPCError would answer Unknown with this text, so that is its code here.
 */
export class LessorNotPrimaryError extends LeaseError {
  constructor() {
    super(GrpcCode.Unknown, "not a primary lessor");
  }
}

/**
 * etcetera's own limit, not etcd's: lease ids are JavaScript numbers, so a client-given id must be
 * a non-zero safe integer (|id| < 2^53). etcd accepts any non-zero int64.
 */
export class LeaseIdOutOfRangeError extends LeaseError {
  constructor(id: unknown) {
    super(GrpcCode.OutOfRange, `etcdserver: lease ID ${String(id)} is out of the range etcetera supports (|ID| < 2^53)`);
  }
}
