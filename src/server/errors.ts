import { AuthError, type AuthErrorKind } from "../auth/errors.js";
import { GrpcError, Status } from "../grpc/index.js";
import { LeaseError, LeaseExistsError, LeaseTtlTooLargeError, type LeaseErrorKind } from "../lease/errors.js";
import { ErrCompacted, ErrDuplicateKey, ErrEmptyKey, ErrFutureRev, ErrKeyNotFound, ErrLeaseNotFound, ErrLeaseProvided, ErrValueProvided, MvccError, type MvccErrorKind } from "../mvcc/errors.js";
import { ErrTooManyOps } from "../mvcc/txn_check.js";

/**
 * The API edge's errors (etcd's api/v3rpc/rpctypes and togRPCError): clients match on the gRPC
 * status code and the exact message string, so both are reproduced verbatim. The stores raise
 * domain errors (a kind and etcd's text); STORE_ERROR_STATUS below is the one place that says
 * which status each kind is answered with. The server's own errors (no leader, timeouts, ...) are
 * defined in `Errors` with their status and text.
 */

/** An error carrying the gRPC status the transport answers with. */
export class EtcdError extends GrpcError {
  constructor(code: Status, message: string) {
    super(code, message);
    this.name = "EtcdError";
  }
}

/** The status etcd answers each store error with (rpctypes' ErrGRPC* codes). */
const STORE_ERROR_STATUS: Record<MvccErrorKind | LeaseErrorKind, Status> = {
  compacted: Status.OUT_OF_RANGE,
  futureRev: Status.OUT_OF_RANGE,
  duplicateKey: Status.INVALID_ARGUMENT,
  emptyKey: Status.INVALID_ARGUMENT,
  keyNotFound: Status.INVALID_ARGUMENT,
  valueProvided: Status.INVALID_ARGUMENT,
  leaseProvided: Status.INVALID_ARGUMENT,
  tooManyOps: Status.INVALID_ARGUMENT,
  emptyWatcherRange: Status.INVALID_ARGUMENT,
  watcherDuplicateId: Status.INVALID_ARGUMENT,
  leaseNotFound: Status.NOT_FOUND,
  leaseExists: Status.FAILED_PRECONDITION,
  leaseTtlTooLarge: Status.OUT_OF_RANGE,
  // lease.ErrNotPrimary never reaches a client in etcd (the keep-alive is forwarded); were it to
  // leak, togRPCError would answer it Unknown.
  notPrimary: Status.UNKNOWN,
  // etcetera's own limit (lease ids are JavaScript numbers), answered as an out-of-range value.
  leaseIdOutOfRange: Status.OUT_OF_RANGE,
};

/** The status and text etcd answers each auth store error with (rpctypes' ErrGRPC* of auth). */
const AUTH_ERROR: Record<AuthErrorKind, [Status, string]> = {
  rootUserNotExist: [Status.FAILED_PRECONDITION, "etcdserver: root user does not exist"],
  rootRoleNotExist: [Status.FAILED_PRECONDITION, "etcdserver: root user does not have root role"],
  userAlreadyExist: [Status.FAILED_PRECONDITION, "etcdserver: user name already exists"],
  userEmpty: [Status.INVALID_ARGUMENT, "etcdserver: user name is empty"],
  userNotFound: [Status.FAILED_PRECONDITION, "etcdserver: user name not found"],
  roleAlreadyExist: [Status.FAILED_PRECONDITION, "etcdserver: role name already exists"],
  roleNotFound: [Status.FAILED_PRECONDITION, "etcdserver: role name not found"],
  roleEmpty: [Status.INVALID_ARGUMENT, "etcdserver: role name is empty"],
  authFailed: [Status.INVALID_ARGUMENT, "etcdserver: authentication failed, invalid user ID or password"],
  permissionDenied: [Status.PERMISSION_DENIED, "etcdserver: permission denied"],
  roleNotGranted: [Status.FAILED_PRECONDITION, "etcdserver: role is not granted to the user"],
  permissionNotGranted: [Status.FAILED_PRECONDITION, "etcdserver: permission is not granted to the role"],
  authNotEnabled: [Status.FAILED_PRECONDITION, "etcdserver: authentication is not enabled"],
  authOldRevision: [Status.INVALID_ARGUMENT, "etcdserver: revision of auth store is old"],
  invalidAuthToken: [Status.UNAUTHENTICATED, "etcdserver: invalid auth token"],
  invalidAuthMgmt: [Status.INVALID_ARGUMENT, "etcdserver: invalid auth management"],
};

/**
 * An auth error as etcd 3.4's maintenance RPCs answer it: passed through unmapped, so code
 * Unknown with the store's text ("auth: permission denied").
 */
export function unmappedAuthError(e: AuthError): GrpcError {
  return new GrpcError(Status.UNKNOWN, e.message);
}

/**
 * Any error for a client as the gRPC status to answer with: a store's domain error by the map
 * above, a GrpcError as it is; anything else is a bug and answers UNKNOWN with its text.
 */
export function toEtcdError(e: unknown): GrpcError {
  if (e instanceof GrpcError) return e;
  if (e instanceof MvccError || e instanceof LeaseError) return new EtcdError(STORE_ERROR_STATUS[e.kind], e.message);
  if (e instanceof AuthError) {
    const [code, text] = AUTH_ERROR[e.kind];
    return new EtcdError(code, text);
  }
  if (e instanceof Error) return new GrpcError(Status.UNKNOWN, e.message);
  return new GrpcError(Status.UNKNOWN, String(e));
}

/** A store's error as the edge answers it (the text lives with the store that raises it). */
function store(make: () => MvccError | LeaseError): () => GrpcError {
  return () => toEtcdError(make());
}

function auth(kind: AuthErrorKind): () => GrpcError {
  return () => toEtcdError(new AuthError(kind));
}

function def(code: Status, message: string): () => EtcdError {
  return () => new EtcdError(code, message);
}

export const Errors = {
  emptyKey: store(() => new ErrEmptyKey()),
  keyNotFound: store(() => new ErrKeyNotFound()),
  valueProvided: store(() => new ErrValueProvided()),
  leaseProvided: store(() => new ErrLeaseProvided()),
  ttlZero: def(Status.INVALID_ARGUMENT, "etcdserver: ttl is 0"),
  tooManyOps: store(() => new ErrTooManyOps()),
  duplicateKey: store(() => new ErrDuplicateKey()),
  compacted: store(() => new ErrCompacted()),
  futureRev: store(() => new ErrFutureRev()),
  noSpace: def(Status.RESOURCE_EXHAUSTED, "etcdserver: mvcc: database space exceeded"),

  leaseNotFound: store(() => new ErrLeaseNotFound()),
  leaseExist: store(() => new LeaseExistsError()),
  leaseTTLTooLarge: store(() => new LeaseTtlTooLargeError()),

  memberExist: def(Status.FAILED_PRECONDITION, "etcdserver: member ID already exist"),
  peerURLExist: def(Status.FAILED_PRECONDITION, "etcdserver: Peer URLs already exists"),
  // Unknown, not FailedPrecondition: etcd 3.4's toGRPCErrorMap has no entry for
  // ErrNotEnoughStartedMembers, so togRPCError wraps its text in codes.Unknown.
  memberNotEnoughStarted: def(
    Status.UNKNOWN,
    "etcdserver: re-configuration failed due to not enough started members",
  ),
  memberBadURLs: def(Status.INVALID_ARGUMENT, "etcdserver: given member URLs are invalid"),
  memberNotFound: def(Status.NOT_FOUND, "etcdserver: member not found"),
  memberNotLearner: def(Status.FAILED_PRECONDITION, "etcdserver: can only promote a learner member"),
  learnerNotReady: def(
    Status.FAILED_PRECONDITION,
    "etcdserver: can only promote a learner member which is in sync with leader",
  ),
  tooManyLearners: def(Status.FAILED_PRECONDITION, "etcdserver: too many learner members in cluster"),

  requestTooLarge: def(Status.INVALID_ARGUMENT, "etcdserver: request is too large"),
  tooManyRequests: def(Status.RESOURCE_EXHAUSTED, "etcdserver: too many requests"),

  permissionDenied: auth("permissionDenied"),
  authNotEnabled: auth("authNotEnabled"),
  invalidAuthToken: auth("invalidAuthToken"),
  authOldRevision: auth("authOldRevision"),
  userEmpty: auth("userEmpty"),

  noLeader: def(Status.UNAVAILABLE, "etcdserver: no leader"),
  notLeader: def(Status.FAILED_PRECONDITION, "etcdserver: not leader"),
  leaderChanged: def(Status.UNAVAILABLE, "etcdserver: leader changed"),
  notCapable: def(Status.UNAVAILABLE, "etcdserver: not capable"),
  stopped: def(Status.UNAVAILABLE, "etcdserver: server stopped"),
  // etcd's ErrCanceled: the caller went away while the request waited (no one reads the answer).
  canceled: def(Status.CANCELLED, "etcdserver: request cancelled"),
  timeout: def(Status.UNAVAILABLE, "etcdserver: request timed out"),
  timeoutDueToLeaderFail: def(
    Status.UNAVAILABLE,
    "etcdserver: request timed out, possibly due to previous leader failure",
  ),
  timeoutDueToConnectionLost: def(
    Status.UNAVAILABLE,
    "etcdserver: request timed out, possibly due to connection lost",
  ),
  unhealthy: def(Status.UNAVAILABLE, "etcdserver: unhealthy cluster"),
  corrupt: def(Status.DATA_LOSS, "etcdserver: corrupt cluster"),
  notSupportedForLearner: def(Status.UNAVAILABLE, "etcdserver: rpc not supported for learner"),
  timeoutLeaderTransfer: def(Status.UNAVAILABLE, "etcdserver: request timed out, leader transfer took too long"),
  badLeaderTransferee: def(Status.FAILED_PRECONDITION, "etcdserver: bad leader transferee"),
} as const;
