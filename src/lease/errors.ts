/**
 * The lessor's errors: a kind and etcd's exact client-visible message (api/v3rpc/rpctypes). The
 * lessor speaks no gRPC: the API edge maps each kind to its status code, once, in
 * src/server/errors.ts.
 */

/** What went wrong, as the API edge's status map knows it. */
export type LeaseErrorKind = "leaseNotFound" | "leaseExists" | "leaseTtlTooLarge" | "notPrimary" | "leaseIdOutOfRange";

/** Base class of every lessor error. */
export class LeaseError extends Error {
  constructor(
    readonly kind: LeaseErrorKind,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** etcd ErrGRPCLeaseNotFound (lease.ErrLeaseNotFound). */
export class LeaseNotFoundError extends LeaseError {
  constructor() {
    super("leaseNotFound", "etcdserver: requested lease not found");
  }
}

/** etcd ErrGRPCLeaseExist (lease.ErrLeaseExists). */
export class LeaseExistsError extends LeaseError {
  constructor() {
    super("leaseExists", "etcdserver: lease already exists");
  }
}

/** etcd ErrGRPCLeaseTTLTooLarge (lease.ErrLeaseTTLTooLarge, TTL > MaxLeaseTTL). */
export class LeaseTtlTooLargeError extends LeaseError {
  constructor() {
    super("leaseTtlTooLarge", "etcdserver: too large lease TTL");
  }
}

/**
 * etcd's lease.ErrNotPrimary: a renew reached a member that is not the leader. In etcd this never
 * reaches a client: the server forwards the keep-alive to the leader (and retries). Were it to leak,
 * etcd's togRPCError would answer Unknown with this text, so the status map says Unknown.
 */
export class LessorNotPrimaryError extends LeaseError {
  constructor() {
    super("notPrimary", "not a primary lessor");
  }
}

/**
 * A lease id that is not an int64 (a JSON decimal string beyond 64 bits, a fraction): only the
 * gateway's and tools' text can carry one, the protobuf wire cannot. Every int64 is a valid id.
 */
export class LeaseIdOutOfRangeError extends LeaseError {
  constructor(id: unknown) {
    super("leaseIdOutOfRange", `etcdserver: lease ID ${String(id)} is not an int64`);
  }
}
