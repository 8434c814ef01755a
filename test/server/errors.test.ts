/**
 * The API edge's one map from a store's domain error to what the client gets: etcd's status code
 * (api/v3rpc/rpctypes' ErrGRPC* codes) and its exact text. test/e2e/errors.test.ts checks the same
 * answers end to end, against real etcd too.
 */
import { describe, expect, it } from "vitest";
import { GrpcError, Status } from "../../src/grpc/status.js";
import { LeaseExistsError, LeaseIdOutOfRangeError, LeaseNotFoundError, LeaseTtlTooLargeError, LessorNotPrimaryError } from "../../src/lease/errors.js";
import {
  ErrCompacted,
  ErrDuplicateKey,
  ErrEmptyKey,
  ErrEmptyWatcherRange,
  ErrFutureRev,
  ErrKeyNotFound,
  ErrLeaseNotFound,
  ErrLeaseProvided,
  ErrValueProvided,
  ErrWatcherDuplicateID,
} from "../../src/mvcc/errors.js";
import { ErrTooManyOps } from "../../src/mvcc/txn_check.js";
import { Errors, toEtcdError } from "../../src/server/errors.js";

const cases: Array<[Error, number, string]> = [
  [new ErrCompacted(), Status.OUT_OF_RANGE, "etcdserver: mvcc: required revision has been compacted"],
  [new ErrFutureRev(), Status.OUT_OF_RANGE, "etcdserver: mvcc: required revision is a future revision"],
  [new ErrDuplicateKey(), Status.INVALID_ARGUMENT, "etcdserver: duplicate key given in txn request"],
  [new ErrEmptyKey(), Status.INVALID_ARGUMENT, "etcdserver: key is not provided"],
  [new ErrKeyNotFound(), Status.INVALID_ARGUMENT, "etcdserver: key not found"],
  [new ErrValueProvided(), Status.INVALID_ARGUMENT, "etcdserver: value is provided"],
  [new ErrLeaseProvided(), Status.INVALID_ARGUMENT, "etcdserver: lease is provided"],
  [new ErrTooManyOps(), Status.INVALID_ARGUMENT, "etcdserver: too many operations in txn request"],
  [new ErrLeaseNotFound(), Status.NOT_FOUND, "etcdserver: requested lease not found"],
  [new ErrEmptyWatcherRange(), Status.INVALID_ARGUMENT, "mvcc: watcher range is empty"],
  [new ErrWatcherDuplicateID(), Status.INVALID_ARGUMENT, "mvcc: duplicate watch ID provided on the WatchStream"],
  [new LeaseNotFoundError(), Status.NOT_FOUND, "etcdserver: requested lease not found"],
  [new LeaseExistsError(), Status.FAILED_PRECONDITION, "etcdserver: lease already exists"],
  [new LeaseTtlTooLargeError(), Status.OUT_OF_RANGE, "etcdserver: too large lease TTL"],
  [new LessorNotPrimaryError(), Status.UNKNOWN, "not a primary lessor"],
  [new LeaseIdOutOfRangeError("9223372036854775808"), Status.OUT_OF_RANGE, "etcdserver: lease ID 9223372036854775808 is not an int64"],
];

describe("toEtcdError: the one map from store errors to etcd's status and text", () => {
  it.each(cases)("%s", (err, code, message) => {
    expect("code" in err, "a store error carries no gRPC code of its own").toBe(false);
    const g = toEtcdError(err);
    expect(g).toBeInstanceOf(GrpcError);
    expect(g.code).toBe(code);
    expect(g.message).toBe(message);
  });

  it("keeps a GrpcError as it is and answers anything else UNKNOWN with its text", () => {
    const g = new GrpcError(Status.UNAVAILABLE, "etcdserver: no leader");
    expect(toEtcdError(g)).toBe(g);
    expect(toEtcdError(new Error("boom"))).toMatchObject({ code: Status.UNKNOWN, message: "boom" });
    expect(toEtcdError("text")).toMatchObject({ code: Status.UNKNOWN, message: "text" });
  });

  it("the member's Errors that name a store error answer as the store's error does", () => {
    expect(Errors.compacted()).toMatchObject({ code: Status.OUT_OF_RANGE, message: new ErrCompacted().message });
    expect(Errors.emptyKey()).toMatchObject({ code: Status.INVALID_ARGUMENT, message: new ErrEmptyKey().message });
    expect(Errors.leaseTTLTooLarge()).toMatchObject({ code: Status.OUT_OF_RANGE, message: new LeaseTtlTooLargeError().message });
  });
});
