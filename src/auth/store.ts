/**
 * The auth store (etcd's auth/store.go): users, roles, their key permissions, whether auth is
 * enabled, and the auth revision, kept in the backend (tables auth, auth_users, auth_roles; users
 * and roles as etcd encodes them, authpb.User and authpb.Role) and mirrored in memory. Every change
 * arrives through Raft and is applied here in log order on every member, so the mutations below are
 * deterministic: a password comes already hashed (the proposing member hashed it), a token prefix
 * already chosen. Each change bumps the auth revision, which drops the permission cache and makes
 * identities established at an older revision answer "revision of auth store is old".
 *
 * The permission checks (isRangePermitted, isPutPermitted, ...) are etcd's isOpPermitted: always
 * allowed while auth is disabled; revision 0 (no identity) is "user name is empty"; an identity
 * older than the store's revision is "old revision"; a user with the root role may do anything.
 */
import type { Backend } from "../backend/backend.js";
import type { BatchTx, ReadStatement, WriteStatement } from "../backend/batch_tx.js";
import type { MessageCodec } from "../pb/codec.js";
import type { Role as RolePb, RoleInit, User as UserPb, UserInit } from "../pb/member-types.js";
import { loadMemberCodecs } from "../pb/protos.js";
import { authError } from "./errors.js";
import { isRangePermitted, mergePerms, RangePermCache } from "./range_perm_cache.js";
import { PermType, ROOT_ROLE, ROOT_USER, type AuthInfo, type AuthRole, type AuthUser, type KeyPermission } from "./types.js";

export const AUTH_SCHEMA = [
  "CREATE TABLE IF NOT EXISTS auth (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
  "CREATE TABLE IF NOT EXISTS auth_users (name BLOB PRIMARY KEY, user BLOB NOT NULL) WITHOUT ROWID",
  "CREATE TABLE IF NOT EXISTS auth_roles (name BLOB PRIMARY KEY, role BLOB NOT NULL) WITHOUT ROWID",
].join(";\n");

/** What the store tells its token provider (tokens die with a user or with auth). */
export interface AuthTokenHooks {
  enable(): void;
  disable(): void;
  invalidateUser(username: string): void;
}

export interface AuthStoreOptions {
  backend: Backend;
  tokens: AuthTokenHooks;
  log?: (msg: string, fields: Record<string, unknown>) => void;
}

interface Codecs {
  user: MessageCodec<UserPb, UserInit>;
  role: MessageCodec<RolePb, RoleInit>;
}

let codecs: Codecs | undefined;
function authCodecs(): Codecs {
  if (codecs === undefined) {
    const c = loadMemberCodecs();
    codecs = { user: c.message<UserPb, UserInit>("authpb.User"), role: c.message<RolePb, RoleInit>("authpb.Role") };
  }
  return codecs;
}

/** etcd's authpb.User bytes of a user (what the authUsers bucket holds). */
export function encodeUser(u: AuthUser): Buffer {
  return Buffer.from(
    authCodecs().user.encode({ name: Buffer.from(u.name), password: u.password, roles: u.roles, options: u.noPassword ? { noPassword: true } : null }),
  );
}

export function decodeUser(b: Buffer): AuthUser {
  const u = authCodecs().user.decode(b);
  return { name: u.name.toString(), password: Buffer.from(u.password), roles: [...u.roles], noPassword: u.options?.noPassword ?? false };
}

/** etcd's authpb.Role bytes of a role (what the authRoles bucket holds). */
export function encodeRole(r: AuthRole): Buffer {
  return Buffer.from(
    authCodecs().role.encode({
      name: Buffer.from(r.name),
      keyPermission: r.keyPermission.map((p) => ({ permType: p.permType, key: p.key, rangeEnd: p.rangeEnd })),
    }),
  );
}

export function decodeRole(b: Buffer): AuthRole {
  const r = authCodecs().role.decode(b);
  return {
    name: r.name.toString(),
    keyPermission: r.keyPermission.map((p) => ({ permType: p.permType as PermType, key: Buffer.from(p.key), rangeEnd: Buffer.from(p.rangeEnd) })),
  };
}

interface Statements {
  putMeta: WriteStatement<[string, number]>;
  putUser: WriteStatement<[Buffer, Buffer]>;
  delUser: WriteStatement<[Buffer]>;
  putRole: WriteStatement<[Buffer, Buffer]>;
  delRole: WriteStatement<[Buffer]>;
}

export class AuthStore {
  private enabled = false;
  private rev = 0;
  /** By name; iteration order is not relied on (lists are sorted as bbolt's buckets are). */
  private readonly users = new Map<string, AuthUser>();
  private readonly roles = new Map<string, AuthRole>();
  private readonly cache = new RangePermCache();
  private stmts!: Statements;

  constructor(private readonly o: AuthStoreOptions) {
    o.backend.register({ name: "auth", schema: AUTH_SCHEMA, recover: (tx) => this.recover(tx) });
  }

  private recover(tx: BatchTx): void {
    this.stmts = {
      putMeta: tx.write("INSERT OR REPLACE INTO auth (key, value) VALUES (?, ?)"),
      putUser: tx.write("INSERT OR REPLACE INTO auth_users (name, user) VALUES (?, ?)"),
      delUser: tx.write("DELETE FROM auth_users WHERE name = ?"),
      putRole: tx.write("INSERT OR REPLACE INTO auth_roles (name, role) VALUES (?, ?)"),
      delRole: tx.write("DELETE FROM auth_roles WHERE name = ?"),
    };
    const meta = tx.read<[], { key: string; value: number }>("SELECT key, value FROM auth") as ReadStatement<[], { key: string; value: number }>;
    const m = new Map(meta.all().map((r) => [r.key, r.value] as const));
    this.users.clear();
    for (const row of tx.read<[], { user: Buffer }>("SELECT user FROM auth_users").all()) {
      const u = decodeUser(row.user);
      this.users.set(u.name, u);
    }
    this.roles.clear();
    for (const row of tx.read<[], { role: Buffer }>("SELECT role FROM auth_roles").all()) {
      const r = decodeRole(row.role);
      this.roles.set(r.name, r);
    }
    this.cache.clear();
    this.rev = m.get("revision") ?? 0;
    // etcd's NewAuthStore: a new store starts at revision 1, so a real identity is never revision 0.
    if (this.rev === 0) this.commitRevision();
    const wasEnabled = this.enabled;
    this.enabled = (m.get("enabled") ?? 0) === 1;
    if (this.enabled) this.o.tokens.enable();
    else if (wasEnabled) this.o.tokens.disable();
  }

  // ---------------------------------------------------------------- reads

  isEnabled(): boolean {
    return this.enabled;
  }

  revision(): number {
    return this.rev;
  }

  user(name: string): AuthUser | undefined {
    return this.users.get(name);
  }

  hasRole(username: string, role: string): boolean {
    return this.users.get(username)?.roles.includes(role) ?? false;
  }

  /** Every user, sorted by name (as etcd's bucket is). */
  listUsers(): AuthUser[] {
    return [...this.users.values()].sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  }

  listRoles(): AuthRole[] {
    return [...this.roles.values()].sort((a, b) => Buffer.compare(Buffer.from(a.name), Buffer.from(b.name)));
  }

  // ---------------------------------------------------------------- changes (applied in log order)

  /** etcd's AuthEnable: refused without a root user holding the root role; a no-op when enabled. */
  enable(): void {
    if (this.enabled) {
      this.o.log?.("authentication is already enabled; ignored auth enable request", {});
      return;
    }
    const root = this.users.get(ROOT_USER);
    if (root === undefined) throw authError("rootUserNotExist");
    if (!root.roles.includes(ROOT_ROLE)) throw authError("rootRoleNotExist");
    this.enabled = true;
    this.stmts.putMeta.run("enabled", 1);
    this.o.tokens.enable();
    this.cache.clear();
    this.commitRevision();
    this.o.log?.("enabled authentication", {});
  }

  disable(): void {
    if (!this.enabled) return;
    this.enabled = false;
    this.stmts.putMeta.run("enabled", 0);
    this.commitRevision();
    this.o.tokens.disable();
    this.o.log?.("disabled authentication", {});
  }

  /** The apply of Authenticate: the password was checked before proposing (checkPassword). */
  authenticate(name: string): AuthInfo {
    if (!this.enabled) throw authError("authNotEnabled");
    const u = this.users.get(name);
    if (u === undefined || u.noPassword) throw authError("authFailed");
    return { username: name, revision: this.rev };
  }

  userAdd(name: string, hashedPassword: Buffer, noPassword: boolean): void {
    if (name.length === 0) throw authError("userEmpty");
    if (this.users.has(name)) throw authError("userAlreadyExist");
    this.putUser({ name, password: noPassword ? Buffer.alloc(0) : hashedPassword, roles: [], noPassword });
    this.commitRevision();
    this.o.log?.("added a user", { userName: name });
  }

  userDelete(name: string): void {
    if (this.enabled && name === ROOT_USER) throw authError("invalidAuthMgmt");
    if (!this.users.has(name)) throw authError("userNotFound");
    this.users.delete(name);
    this.stmts.delUser.run(Buffer.from(name));
    this.cache.clear();
    this.commitRevision();
    this.o.tokens.invalidateUser(name);
    this.o.log?.("deleted a user", { userName: name });
  }

  userChangePassword(name: string, hashedPassword: Buffer): void {
    const u = this.users.get(name);
    if (u === undefined) throw authError("userNotFound");
    this.putUser({ ...u, password: hashedPassword });
    this.commitRevision();
    this.o.tokens.invalidateUser(name);
    this.o.log?.("changed a password of a user", { userName: name });
  }

  userGrantRole(name: string, role: string): void {
    const u = this.users.get(name);
    if (u === undefined) throw authError("userNotFound");
    // etcd lets the root role be granted before it exists.
    if (role !== ROOT_ROLE && !this.roles.has(role)) throw authError("roleNotFound");
    if (u.roles.includes(role)) {
      this.o.log?.("ignored grant role request to a user", { userName: name, roleName: role });
      return;
    }
    this.putUser({ ...u, roles: [...u.roles, role].sort(compareNames) });
    this.cache.clear();
    this.commitRevision();
    this.o.log?.("granted a role to a user", { userName: name, roleName: role });
  }

  userRevokeRole(name: string, role: string): void {
    if (this.enabled && name === ROOT_USER && role === ROOT_ROLE) throw authError("invalidAuthMgmt");
    const u = this.users.get(name);
    if (u === undefined) throw authError("userNotFound");
    if (!u.roles.includes(role)) throw authError("roleNotGranted");
    this.putUser({ ...u, roles: u.roles.filter((r) => r !== role) });
    this.cache.clear();
    this.commitRevision();
    this.o.log?.("revoked a role from a user", { userName: name, roleName: role });
  }

  userGet(name: string): string[] {
    const u = this.users.get(name);
    if (u === undefined) throw authError("userNotFound");
    return [...u.roles];
  }

  roleAdd(name: string): void {
    if (name.length === 0) throw authError("roleEmpty");
    if (this.roles.has(name)) throw authError("roleAlreadyExist");
    this.putRole({ name, keyPermission: [] });
    this.commitRevision();
    this.o.log?.("created a role", { roleName: name });
  }

  /** Deleting a role also takes it from every user that has it (etcd's RoleDelete). */
  roleDelete(name: string): void {
    if (this.enabled && name === ROOT_ROLE) throw authError("invalidAuthMgmt");
    if (!this.roles.has(name)) throw authError("roleNotFound");
    this.roles.delete(name);
    this.stmts.delRole.run(Buffer.from(name));
    for (const u of this.listUsers()) {
      if (u.roles.includes(name)) this.putUser({ ...u, roles: u.roles.filter((r) => r !== name) });
    }
    this.cache.clear();
    this.commitRevision();
    this.o.log?.("deleted a role", { roleName: name });
  }

  roleGet(name: string): KeyPermission[] {
    const r = this.roles.get(name);
    if (r === undefined) throw authError("roleNotFound");
    return r.keyPermission.map((p) => ({ ...p }));
  }

  /** A permission on the same key and range end replaces the old one's type. */
  roleGrantPermission(name: string, perm: KeyPermission): void {
    const r = this.roles.get(name);
    if (r === undefined) throw authError("roleNotFound");
    const same = r.keyPermission.findIndex((p) => p.key.equals(perm.key) && p.rangeEnd.equals(perm.rangeEnd));
    const perms = [...r.keyPermission];
    if (same >= 0) perms[same] = { ...perms[same]!, permType: perm.permType };
    else perms.push({ permType: perm.permType, key: Buffer.from(perm.key), rangeEnd: Buffer.from(perm.rangeEnd) });
    perms.sort((a, b) => Buffer.compare(a.key, b.key));
    this.putRole({ name, keyPermission: perms });
    this.cache.clear();
    this.commitRevision();
    this.o.log?.("granted/updated a permission to a user", { roleName: name, permissionType: PermType[perm.permType], key: perm.key.toString() });
  }

  roleRevokePermission(name: string, key: Buffer, rangeEnd: Buffer): void {
    const r = this.roles.get(name);
    if (r === undefined) throw authError("roleNotFound");
    const kept = r.keyPermission.filter((p) => !(p.key.equals(key) && p.rangeEnd.equals(rangeEnd)));
    if (kept.length === r.keyPermission.length) throw authError("permissionNotGranted");
    this.putRole({ name, keyPermission: kept });
    this.cache.clear();
    this.commitRevision();
    this.o.log?.("revoked a permission on range", { roleName: name, key: key.toString(), rangeEnd: rangeEnd.toString() });
  }

  // ---------------------------------------------------------------- permission checks

  isRangePermitted(ai: AuthInfo | undefined, key: Uint8Array | undefined, rangeEnd: Uint8Array | undefined): void {
    this.checkOp(ai, key, rangeEnd, PermType.READ);
  }

  isPutPermitted(ai: AuthInfo | undefined, key: Uint8Array | undefined): void {
    this.checkOp(ai, key, undefined, PermType.WRITE);
  }

  isDeleteRangePermitted(ai: AuthInfo | undefined, key: Uint8Array | undefined, rangeEnd: Uint8Array | undefined): void {
    this.checkOp(ai, key, rangeEnd, PermType.WRITE);
  }

  /** etcd's IsAdminPermitted: the user must hold the root role (no revision check, as etcd). */
  isAdminPermitted(ai: AuthInfo | undefined): void {
    if (!this.enabled) return;
    if (ai === undefined || ai.username === "") throw authError("userEmpty");
    const u = this.users.get(ai.username);
    if (u === undefined) throw authError("userNotFound");
    if (!u.roles.includes(ROOT_ROLE)) throw authError("permissionDenied");
  }

  private checkOp(ai: AuthInfo | undefined, key: Uint8Array | undefined, rangeEnd: Uint8Array | undefined, type: PermType): void {
    if (!this.enabled) return;
    if (ai === undefined || ai.revision === 0) throw authError("userEmpty");
    if (ai.revision < this.rev) throw authError("authOldRevision");
    const u = this.users.get(ai.username);
    if (u === undefined) throw authError("permissionDenied");
    if (u.roles.includes(ROOT_ROLE)) return;
    const perms = this.cache.get(u.name, () => mergePerms(u.roles.flatMap((r) => this.roles.get(r)?.keyPermission ?? [])));
    if (!isRangePermitted(perms, key, rangeEnd, type)) throw authError("permissionDenied");
  }

  // ---------------------------------------------------------------- internals

  private putUser(u: AuthUser): void {
    this.users.set(u.name, u);
    this.stmts.putUser.run(Buffer.from(u.name), encodeUser(u));
  }

  private putRole(r: AuthRole): void {
    this.roles.set(r.name, r);
    this.stmts.putRole.run(Buffer.from(r.name), encodeRole(r));
  }

  private commitRevision(): void {
    this.rev++;
    this.stmts.putMeta.run("revision", this.rev);
  }
}

function compareNames(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b));
}
