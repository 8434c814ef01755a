import { GrpcError } from "../grpc/index.js";

/**
 * etcd's server-side errors (api/v3rpc/rpctypes): clients match on the gRPC status code and the
 * exact message string, so both are reproduced verbatim.
 */

/** gRPC status codes used by etcd's errors. */
export const Code = {
  OK: 0,
  Canceled: 1,
  Unknown: 2,
  InvalidArgument: 3,
  DeadlineExceeded: 4,
  NotFound: 5,
  AlreadyExists: 6,
  PermissionDenied: 7,
  ResourceExhausted: 8,
  FailedPrecondition: 9,
  Aborted: 10,
  OutOfRange: 11,
  Unimplemented: 12,
  Internal: 13,
  Unavailable: 14,
  DataLoss: 15,
  Unauthenticated: 16,
} as const;
export type CodeValue = (typeof Code)[keyof typeof Code];

/** An error carrying the gRPC status the transport answers with. */
export class EtcdError extends GrpcError {
  constructor(code: CodeValue, message: string) {
    super(code, message);
    this.name = "EtcdError";
  }
}

/**
 * Any error the stores raise for clients (mvcc, lessor: a numeric gRPC `code` and etcd's message)
 * as the gRPC status to answer with; anything else is a bug and answers UNKNOWN with its text.
 */
export function toEtcdError(e: unknown): GrpcError {
  if (e instanceof GrpcError) return e;
  if (e instanceof Error) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "number" && Number.isInteger(code) && code > 0 && code <= 16) return new EtcdError(code as CodeValue, e.message);
    return new GrpcError(Code.Unknown, e.message);
  }
  return new GrpcError(Code.Unknown, String(e));
}

function def(code: CodeValue, message: string): () => EtcdError {
  return () => new EtcdError(code, message);
}

export const Errors = {
  emptyKey: def(Code.InvalidArgument, "etcdserver: key is not provided"),
  keyNotFound: def(Code.InvalidArgument, "etcdserver: key not found"),
  valueProvided: def(Code.InvalidArgument, "etcdserver: value is provided"),
  leaseProvided: def(Code.InvalidArgument, "etcdserver: lease is provided"),
  ttlZero: def(Code.InvalidArgument, "etcdserver: ttl is 0"),
  tooManyOps: def(Code.InvalidArgument, "etcdserver: too many operations in txn request"),
  duplicateKey: def(Code.InvalidArgument, "etcdserver: duplicate key given in txn request"),
  compacted: def(Code.OutOfRange, "etcdserver: mvcc: required revision has been compacted"),
  futureRev: def(Code.OutOfRange, "etcdserver: mvcc: required revision is a future revision"),
  noSpace: def(Code.ResourceExhausted, "etcdserver: mvcc: database space exceeded"),

  leaseNotFound: def(Code.NotFound, "etcdserver: requested lease not found"),
  leaseExist: def(Code.FailedPrecondition, "etcdserver: lease already exists"),
  leaseTTLTooLarge: def(Code.OutOfRange, "etcdserver: too large lease TTL"),

  memberExist: def(Code.FailedPrecondition, "etcdserver: member ID already exist"),
  peerURLExist: def(Code.FailedPrecondition, "etcdserver: Peer URLs already exists"),
  memberNotEnoughStarted: def(
    Code.FailedPrecondition,
    "etcdserver: re-configuration failed due to not enough started members",
  ),
  memberBadURLs: def(Code.InvalidArgument, "etcdserver: given member URLs are invalid"),
  memberNotFound: def(Code.NotFound, "etcdserver: member not found"),
  memberNotLearner: def(Code.FailedPrecondition, "etcdserver: can only promote a learner member"),
  learnerNotReady: def(
    Code.FailedPrecondition,
    "etcdserver: can only promote a learner member which is in sync with leader",
  ),
  tooManyLearners: def(Code.FailedPrecondition, "etcdserver: too many learner members in cluster"),

  requestTooLarge: def(Code.InvalidArgument, "etcdserver: request is too large"),
  tooManyRequests: def(Code.ResourceExhausted, "etcdserver: too many requests"),

  permissionDenied: def(Code.PermissionDenied, "etcdserver: permission denied"),
  authNotEnabled: def(Code.FailedPrecondition, "etcdserver: authentication is not enabled"),
  invalidAuthToken: def(Code.Unauthenticated, "etcdserver: invalid auth token"),

  noLeader: def(Code.Unavailable, "etcdserver: no leader"),
  notLeader: def(Code.FailedPrecondition, "etcdserver: not leader"),
  leaderChanged: def(Code.Unavailable, "etcdserver: leader changed"),
  notCapable: def(Code.Unavailable, "etcdserver: not capable"),
  stopped: def(Code.Unavailable, "etcdserver: server stopped"),
  timeout: def(Code.Unavailable, "etcdserver: request timed out"),
  timeoutDueToLeaderFail: def(
    Code.Unavailable,
    "etcdserver: request timed out, possibly due to previous leader failure",
  ),
  timeoutDueToConnectionLost: def(
    Code.Unavailable,
    "etcdserver: request timed out, possibly due to connection lost",
  ),
  unhealthy: def(Code.Unavailable, "etcdserver: unhealthy cluster"),
  corrupt: def(Code.DataLoss, "etcdserver: corrupt cluster"),
  notSupportedForLearner: def(Code.Unavailable, "etcdserver: rpc not supported for learner"),
  badLeaderTransferee: def(Code.FailedPrecondition, "etcdserver: bad leader transferee"),
} as const;
