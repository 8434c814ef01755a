/**
 * grpc.health.v1.Health as etcd 3.4 registers it (v3rpc/grpc.go: grpc-go's health server with
 * the empty service name set SERVING once, never changed): Check answers SERVING for "" and
 * NOT_FOUND "unknown service" for any other name; Watch sends the current status (SERVICE_UNKNOWN
 * for an unknown name) and then stays open, since nothing here ever changes it.
 */
import { GrpcError, Status, type MemberHandlers } from "../../grpc/index.js";
import { HealthCheckResponse_ServingStatus as ServingStatus } from "../../pb/member-types.js";

/** The service names with a status: etcd sets only "", for all its services. */
const STATUSES: ReadonlyMap<string, ServingStatus> = new Map([["", ServingStatus.SERVING]]);

export function healthService(): MemberHandlers<"grpc.health.v1.Health"> {
  return {
    Check: (req) => {
      const status = STATUSES.get(req.service);
      if (status === undefined) throw new GrpcError(Status.NOT_FOUND, "unknown service");
      return { status };
    },

    Watch: (req, call, ctx) => {
      call.write({ status: STATUSES.get(req.service) ?? ServingStatus.SERVICE_UNKNOWN });
      // Open until the client goes away (grpc-go's Watch returns only on cancellation).
      return new Promise<void>((resolve) => {
        if (ctx.signal.aborted) resolve();
        else ctx.signal.addEventListener("abort", () => resolve(), { once: true });
      });
    },
  };
}
