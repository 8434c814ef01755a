/**
 * Errors the auth store reports (etcd's auth package errors): a kind and the store's own text
 * ("auth: ..."). The store speaks no gRPC: the API edge maps each kind to etcd's status code and
 * its "etcdserver: ..." text (rpctypes), once, in src/server/errors.ts. The store's text is what
 * etcd 3.4 answers where it passes an auth error through unmapped (the maintenance RPCs).
 */

export type AuthErrorKind =
  | "rootUserNotExist"
  | "rootRoleNotExist"
  | "userAlreadyExist"
  | "userEmpty"
  | "userNotFound"
  | "roleAlreadyExist"
  | "roleNotFound"
  | "roleEmpty"
  | "authFailed"
  | "permissionDenied"
  | "roleNotGranted"
  | "permissionNotGranted"
  | "authNotEnabled"
  | "authOldRevision"
  | "invalidAuthToken"
  | "invalidAuthMgmt";

/** The store's text of each kind (etcd's auth/store.go). */
const STORE_TEXT: Record<AuthErrorKind, string> = {
  rootUserNotExist: "auth: root user does not exist",
  rootRoleNotExist: "auth: root user does not have root role",
  userAlreadyExist: "auth: user already exists",
  userEmpty: "auth: user name is empty",
  userNotFound: "auth: user not found",
  roleAlreadyExist: "auth: role already exists",
  roleNotFound: "auth: role not found",
  roleEmpty: "auth: role name is empty",
  authFailed: "auth: authentication failed, invalid user ID or password",
  permissionDenied: "auth: permission denied",
  roleNotGranted: "auth: role is not granted to the user",
  permissionNotGranted: "auth: permission is not granted to the role",
  authNotEnabled: "auth: authentication is not enabled",
  authOldRevision: "auth: revision in header is old",
  invalidAuthToken: "auth: invalid auth token",
  invalidAuthMgmt: "auth: invalid auth management",
};

export class AuthError extends Error {
  readonly kind: AuthErrorKind;
  constructor(kind: AuthErrorKind) {
    super(STORE_TEXT[kind]);
    this.name = "AuthError";
    this.kind = kind;
  }
}

/** Shorthand: `throw authError("userNotFound")`. */
export function authError(kind: AuthErrorKind): AuthError {
  return new AuthError(kind);
}
