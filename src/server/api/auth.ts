/**
 * etcdserverpb.Auth: enable/disable, Authenticate, users and roles. Every request but AuthStatus
 * goes through raft (reads too, as etcd), so each member's auth store applies the same changes in
 * the same order; the permission to make them is checked at apply (apply_auth.ts). Passwords are
 * hashed here, before proposing: the log carries the bcrypt hash, never the password.
 */
import type { CallContext, MemberHandlers } from "../../grpc/index.js";
import type { Permission } from "../../pb/member-types.js";
import type { AuthChangeRequest, V3Server } from "../v3_server.js";
import { authorized } from "./authorize.js";
import { guarded, requireLeaderIfAsked } from "./guard.js";
import { header, type ResponseHeader } from "./header.js";

export function authService(s: V3Server): MemberHandlers<"etcdserverpb.Auth"> {
  /** Proposes `req` for the call's identity; the response is the applied body plus a header. */
  const change = <T extends object>(ctx: CallContext, req: AuthChangeRequest) =>
    guarded(async (): Promise<T & { header: ResponseHeader }> => {
      requireLeaderIfAsked(s, ctx);
      const a = await authorized(s, ctx);
      const { response, revision } = await a.authChange<T>(req, ctx.signal);
      return { ...response, header: header(s, revision) };
    });

  /**
   * The bcrypt hash of a new password. Only for a caller who may make the change (checked again at
   * apply): hashing costs a thread-pool slot, not to be had for a request that will be refused.
   */
  const hashFor = async (ctx: CallContext, password: string): Promise<string> => {
    const a = await authorized(s, ctx);
    if (a.authEnabled()) a.requireAdmin();
    return a.hashPassword(password);
  };

  return {
    AuthEnable: (_req, ctx) => change(ctx, { authEnable: {} }),
    AuthDisable: (_req, ctx) => change(ctx, { authDisable: {} }),
    AuthStatus: (_req, ctx) =>
      guarded(() => {
        requireLeaderIfAsked(s, ctx);
        const st = s.authStatus();
        return { header: header(s), enabled: st.enabled, authRevision: st.authRevision };
      }),

    Authenticate: (req, ctx) =>
      guarded(async () => {
        requireLeaderIfAsked(s, ctx);
        const { response, revision } = await s.authenticate(req.name, req.password, ctx.signal);
        return { header: header(s, revision), token: response.token };
      }),

    UserAdd: (req, ctx) =>
      guarded(async () => {
        const noPassword = req.options?.noPassword ?? false;
        const hashedPassword = noPassword || req.name === "" ? "" : await hashFor(ctx, req.password);
        return change(ctx, { authUserAdd: { name: req.name, options: req.options ?? null, hashedPassword } });
      }),
    UserGet: (req, ctx) => change<{ roles: string[] }>(ctx, { authUserGet: { name: req.name } }),
    UserList: (_req, ctx) => change<{ users: string[] }>(ctx, { authUserList: {} }),
    UserDelete: (req, ctx) => change(ctx, { authUserDelete: { name: req.name } }),
    UserChangePassword: (req, ctx) =>
      guarded(async () => {
        const hashedPassword = await hashFor(ctx, req.password);
        return change(ctx, { authUserChangePassword: { name: req.name, hashedPassword } });
      }),
    UserGrantRole: (req, ctx) => change(ctx, { authUserGrantRole: { user: req.user, role: req.role } }),
    UserRevokeRole: (req, ctx) => change(ctx, { authUserRevokeRole: { name: req.name, role: req.role } }),

    RoleAdd: (req, ctx) => change(ctx, { authRoleAdd: { name: req.name } }),
    RoleGet: (req, ctx) => change<{ perm: Permission[] }>(ctx, { authRoleGet: { role: req.role } }),
    RoleList: (_req, ctx) => change<{ roles: string[] }>(ctx, { authRoleList: {} }),
    RoleDelete: (req, ctx) => change(ctx, { authRoleDelete: { role: req.role } }),
    RoleGrantPermission: (req, ctx) => change(ctx, { authRoleGrantPermission: { name: req.name, perm: req.perm ?? null } }),
    RoleRevokePermission: (req, ctx) =>
      change(ctx, { authRoleRevokePermission: { role: req.role, key: req.key, rangeEnd: req.rangeEnd } }),
  };
}
