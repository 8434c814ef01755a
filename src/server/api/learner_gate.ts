/**
 * What a learner serves (etcd's v3rpc interceptors, isRPCSupportedForLearner): Status and
 * serializable Range; every other unary call and every stream answers "etcdserver: rpc not
 * supported for learner", so clients (whose balancer skips such answers) go to a voting member.
 */
import { Errors } from "../errors.js";

/** Unary methods a learner answers, with the request check (a Range only when serializable). */
const SUPPORTED_FOR_LEARNER: Record<string, (req: unknown) => boolean> = {
  "etcdserverpb.Maintenance/Status": () => true,
  "etcdserverpb.KV/Range": (req) => (req as { serializable?: boolean }).serializable === true,
};

/** Wraps every handler of `service` so that a learner refuses what etcd's learner refuses. */
export function learnerGated<H extends object>(isLearner: () => boolean, service: string, handlers: H): H {
  const gated: Record<string, unknown> = {};
  for (const [method, handler] of Object.entries(handlers) as Array<[string, (...args: unknown[]) => unknown]>) {
    const supported = SUPPORTED_FOR_LEARNER[`${service}/${method}`];
    gated[method] = (...args: unknown[]) => {
      // A unary or server-stream handler gets its request first; a client stream or bidi gets the call.
      if (isLearner() && (supported === undefined || !supported(args[0]))) return Promise.reject(Errors.notSupportedForLearner());
      return handler(...args);
    };
  }
  return gated as H;
}
