/**
 * Who a call comes from (etcd's AuthInfoFromCtx at the API edge): the token in its metadata, else
 * (with --client-cert-auth) its verified client certificate's common name, resolved once per
 * request into a view of the member that acts for that identity. A call without credentials on a
 * member with auth disabled costs nothing here.
 */
import { AuthError } from "../../auth/errors.js";
import type { CallContext } from "../../grpc/index.js";
import { unmappedAuthError } from "../errors.js";
import type { Credentials, V3Server } from "../v3_server.js";

/** etcd's rpctypes.TokenFieldNameGRPC and TokenFieldNameSwagger (the gateway's header). */
export const TOKEN_KEY = "token";
export const AUTHORIZATION_KEY = "authorization";

/**
 * The token wins over the certificate (etcd's AuthInfoFromCtx tries the token first); a common
 * name is only there for a certificate the TLS layer verified (--client-cert-auth).
 */
export function credentialsOf(ctx: CallContext): Credentials {
  const token = ctx.metadata.get(TOKEN_KEY) ?? ctx.metadata.get(AUTHORIZATION_KEY);
  if (token !== undefined) return { token };
  const cn = ctx.clientCertCommonName;
  return cn === undefined ? NO_CREDENTIALS : { certCommonName: cn };
}

const NO_CREDENTIALS: Credentials = Object.freeze({});

/**
 * The member acting for the call's identity, without an await when that is the member itself
 * (no credentials and auth off: every call of a cluster without auth), so the hot handlers spend
 * no async step on it (asActingMember). Rejects with "invalid auth token" for a bad token.
 */
export function actingMember(s: V3Server, ctx: CallContext): V3Server | Promise<V3Server> {
  const c = credentialsOf(ctx);
  if (c.token === undefined && c.certCommonName === undefined && !s.authEnabled()) return s;
  return identified(s, c, ctx.signal);
}

async function identified(s: V3Server, c: Credentials, signal: AbortSignal): Promise<V3Server> {
  return s.withAuth(await s.identify(c, signal));
}

/** Runs `f` as the member acting for the call, with no async step of its own when that is the member itself (actingMember). */
export function asActingMember<T>(s: V3Server, ctx: CallContext, f: (m: V3Server) => Promise<T>): Promise<T> {
  const m = actingMember(s, ctx);
  return m instanceof Promise ? m.then(f) : f(m);
}

/** actingMember, always as a promise (the handlers off the hot path). */
export async function authorized(s: V3Server, ctx: CallContext): Promise<V3Server> {
  return actingMember(s, ctx);
}

/** etcd's checkMembershipOperationPermission: member changes need the root role. */
export async function requireAdmin(s: V3Server, ctx: CallContext): Promise<void> {
  (await authorized(s, ctx)).requireAdmin();
}

/**
 * etcd 3.4's maintenance check (authMaintenanceServer.isAuthenticated): root only, and its auth
 * errors go to the client unmapped, code Unknown with the store's text ("auth: permission denied").
 */
export async function requireAdminUnmapped(s: V3Server, ctx: CallContext): Promise<void> {
  try {
    (await authorized(s, ctx)).requireAdmin();
  } catch (e) {
    if (e instanceof AuthError) throw unmappedAuthError(e);
    throw e;
  }
}
