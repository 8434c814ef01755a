/**
 * The auth store's vocabulary (etcd's authpb and auth.AuthInfo).
 */

/** authpb.Permission.Type. */
export enum PermType {
  READ = 0,
  WRITE = 1,
  READWRITE = 2,
}

/** One key permission of a role (authpb.Permission). */
export interface KeyPermission {
  permType: PermType;
  key: Buffer;
  /** Empty: the single key; "\0": from key on; else [key, rangeEnd). */
  rangeEnd: Buffer;
}

export interface AuthUser {
  name: string;
  /** The bcrypt hash; empty for a user added with no password. */
  password: Buffer;
  /** Role names, sorted (etcd keeps them sorted). */
  roles: string[];
  noPassword: boolean;
}

export interface AuthRole {
  name: string;
  /** Sorted by key (etcd's permSlice order). */
  keyPermission: KeyPermission[];
}

/**
 * Who a request comes from (etcd's AuthInfo): the user name and the auth revision its identity
 * was established at. Revision 0 is "nobody" (no token): with auth enabled, etcd answers it
 * "user name is empty".
 */
export interface AuthInfo {
  readonly username: string;
  readonly revision: number;
}

/** The root user and role (etcd's rootUser, rootRole). */
export const ROOT_USER = "root";
export const ROOT_ROLE = "root";
