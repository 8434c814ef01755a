/**
 * Auth at apply (etcd's apply_auth.go and the auth part of applierV3): the permission checks of
 * each replicated request against the identity in its header, and the apply of the Auth service's
 * requests to the auth store. Both run on every member in log order, so a role revoked at index N
 * denies every request applied after N, whoever proposed it and whenever.
 *
 * As etcd 3.4: a Put needs write permission on its key, and on every key already attached to its
 * lease (a user who could not revoke the lease may not extend it); prev_kv adds read permission;
 * DeleteRange needs write (and read with prev_kv) on its range; a Txn needs read on every compare
 * and the permissions of every op of both branches, nested txns included (etcd 3.4 leaves nested
 * ones unchecked; see the README's differences); LeaseRevoke needs write on every attached key;
 * the Auth service's changes need the root role, UserGet only for another user, RoleGet only for a
 * role the user lacks. Compaction, leases and alarms need no permission (etcd 3.4 checks none).
 */
import type { AuthStore } from "../auth/store.js";
import type { TokenProvider } from "../auth/token.js";
import { PermType, type AuthInfo, type KeyPermission } from "../auth/types.js";
import type { Lessor } from "../lease/lessor.js";
import type { RequestOp, TxnRequest } from "../mvcc/types.js";
import type { InternalRaftRequest } from "./raft_request.js";
import type { LeaseId } from "../lease/types.js";

/** The identity a replicated request carries (none: etcd's empty AuthInfo, revision 0). */
export function authInfoOfEntry(req: InternalRaftRequest): AuthInfo | undefined {
  const h = req.header;
  if (h === undefined || (h.username === "" && h.authRevision === 0)) return undefined;
  return { username: h.username, revision: h.authRevision };
}

/** Throws the auth error that refuses `req` for `ai`; returns when it may be applied. */
export function checkEntryPermission(auth: AuthStore, lessor: Lessor, req: InternalRaftRequest, ai: AuthInfo | undefined): void {
  if (!auth.isEnabled()) return;
  if (req.put) {
    auth.isPutPermitted(ai, req.put.key);
    if (req.put.lease) checkLeasePuts(auth, lessor, req.put.lease, ai);
    if (req.put.prevKv) auth.isRangePermitted(ai, req.put.key, undefined);
  } else if (req.deleteRange) {
    auth.isDeleteRangePermitted(ai, req.deleteRange.key, req.deleteRange.rangeEnd);
    if (req.deleteRange.prevKv) auth.isRangePermitted(ai, req.deleteRange.key, req.deleteRange.rangeEnd);
  } else if (req.range) {
    auth.isRangePermitted(ai, req.range.key, req.range.rangeEnd);
  } else if (req.txn) {
    checkTxnPermission(auth, req.txn, ai);
  } else if (req.leaseRevoke) {
    checkLeasePuts(auth, lessor, req.leaseRevoke.ID, ai);
  } else if (needsAdmin(req)) {
    auth.isAdminPermitted(ai);
  } else if (req.authUserGet) {
    if (ai?.username !== req.authUserGet.name) auth.isAdminPermitted(ai);
  } else if (req.authRoleGet) {
    if (ai === undefined || !auth.hasRole(ai.username, req.authRoleGet.role)) auth.isAdminPermitted(ai);
  }
}

/** etcd's checkTxnAuth: every compare is a read; each op of both branches as its own request. */
export function checkTxnPermission(auth: AuthStore, txn: TxnRequest, ai: AuthInfo | undefined): void {
  for (const c of txn.compare ?? []) auth.isRangePermitted(ai, c.key, c.rangeEnd);
  checkOps(auth, txn.success ?? [], ai);
  checkOps(auth, txn.failure ?? [], ai);
}

function checkOps(auth: AuthStore, ops: readonly RequestOp[], ai: AuthInfo | undefined): void {
  for (const op of ops) {
    if (op.requestRange) {
      auth.isRangePermitted(ai, op.requestRange.key, op.requestRange.rangeEnd);
    } else if (op.requestPut) {
      auth.isPutPermitted(ai, op.requestPut.key);
    } else if (op.requestDeleteRange) {
      if (op.requestDeleteRange.prevKv) auth.isRangePermitted(ai, op.requestDeleteRange.key, op.requestDeleteRange.rangeEnd);
      auth.isDeleteRangePermitted(ai, op.requestDeleteRange.key, op.requestDeleteRange.rangeEnd);
    } else if (op.requestTxn) {
      checkTxnPermission(auth, op.requestTxn, ai);
    }
  }
}

/** Write permission on every key attached to `leaseId` (none when the lease does not exist). */
function checkLeasePuts(auth: AuthStore, lessor: Lessor, leaseId: LeaseId, ai: AuthInfo | undefined): void {
  if (!lessor.exists(leaseId)) return;
  for (const key of lessor.timeToLive(leaseId, { keys: true }).keys) auth.isPutPermitted(ai, key);
}

/** etcd's needAdminPermission. */
function needsAdmin(req: InternalRaftRequest): boolean {
  return (
    req.authEnable !== undefined ||
    req.authDisable !== undefined ||
    req.authUserAdd !== undefined ||
    req.authUserDelete !== undefined ||
    req.authUserChangePassword !== undefined ||
    req.authUserGrantRole !== undefined ||
    req.authUserRevokeRole !== undefined ||
    req.authRoleAdd !== undefined ||
    req.authRoleGrantPermission !== undefined ||
    req.authRoleRevokePermission !== undefined ||
    req.authRoleDelete !== undefined ||
    req.authUserList !== undefined ||
    req.authRoleList !== undefined
  );
}

/** What an applied Authenticate hands back to its proposer (the token, or what to sign). */
export interface AuthenticateResult {
  username: string;
  revision: number;
  /** A simple token, fixed at apply; undefined for JWT (signed by the proposer). */
  token: string | undefined;
}

/**
 * Applies an Auth service request; returns its response body, or undefined when `req` is not one.
 * Throws the store's AuthError when refused.
 */
export function applyAuthRequest(auth: AuthStore, tokens: TokenProvider, req: InternalRaftRequest, index: number): object | undefined {
  if (req.authEnable) {
    auth.enable();
    return {};
  }
  if (req.authDisable) {
    auth.disable();
    return {};
  }
  if (req.authenticate) {
    const a = auth.authenticate(req.authenticate.name);
    const r: AuthenticateResult = { ...a, token: tokens.assignAtApply(a.username, a.revision, req.authenticate.simpleToken, index) };
    return r;
  }
  if (req.authUserAdd) {
    const r = req.authUserAdd;
    auth.userAdd(r.name, Buffer.from(r.hashedPassword), r.options?.noPassword ?? false);
    return {};
  }
  if (req.authUserDelete) {
    auth.userDelete(req.authUserDelete.name);
    return {};
  }
  if (req.authUserChangePassword) {
    const r = req.authUserChangePassword;
    auth.userChangePassword(r.name, Buffer.from(r.hashedPassword));
    return {};
  }
  if (req.authUserGrantRole) {
    auth.userGrantRole(req.authUserGrantRole.user, req.authUserGrantRole.role);
    return {};
  }
  if (req.authUserRevokeRole) {
    auth.userRevokeRole(req.authUserRevokeRole.name, req.authUserRevokeRole.role);
    return {};
  }
  if (req.authUserGet) return { roles: auth.userGet(req.authUserGet.name) };
  if (req.authUserList) return { users: auth.listUsers().map((u) => u.name) };
  if (req.authRoleAdd) {
    auth.roleAdd(req.authRoleAdd.name);
    return {};
  }
  if (req.authRoleDelete) {
    auth.roleDelete(req.authRoleDelete.role);
    return {};
  }
  if (req.authRoleGet) return { perm: auth.roleGet(req.authRoleGet.role) };
  if (req.authRoleList) return { roles: auth.listRoles().map((r) => r.name) };
  if (req.authRoleGrantPermission) {
    const p = req.authRoleGrantPermission.perm;
    const perm: KeyPermission = { permType: (p?.permType ?? PermType.READ) as PermType, key: Buffer.from(p?.key ?? []), rangeEnd: Buffer.from(p?.rangeEnd ?? []) };
    auth.roleGrantPermission(req.authRoleGrantPermission.name, perm);
    return {};
  }
  if (req.authRoleRevokePermission) {
    const r = req.authRoleRevokePermission;
    auth.roleRevokePermission(r.role, Buffer.from(r.key), Buffer.from(r.rangeEnd));
    return {};
  }
  return undefined;
}
