/**
 * gRPC's health service on the client port, as etcd 3.4 registers it (the empty service name
 * SERVING), asked with @grpc/grpc-js as a load balancer or Kubernetes' grpc probe would; the same
 * expectations run against real etcd with E2E_TARGET=etcd.
 */
import * as grpc from "@grpc/grpc-js";
import * as loader from "@grpc/proto-loader";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Cluster, ROOT } from "./harness.js";

let cluster: Cluster;
let health: grpc.Client;

interface HealthResponse {
  status: string;
}

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  const pkg = grpc.loadPackageDefinition(
    loader.loadSync("grpc/health/v1/health.proto", { includeDirs: [join(ROOT, "proto")], keepCase: true, enums: String, defaults: true }),
  );
  const Health = ((pkg["grpc"] as grpc.GrpcObject)["health"] as grpc.GrpcObject)["v1"] as grpc.GrpcObject;
  const Ctor = Health["Health"] as unknown as new (address: string, creds: grpc.ChannelCredentials) => grpc.Client;
  health = new Ctor(cluster.members[0]!.endpoint, grpc.credentials.createInsecure());
});
afterAll(async () => {
  health?.close();
  await cluster?.destroy();
});

function check(service: string): Promise<HealthResponse> {
  return new Promise((resolve, reject) => {
    const fn = (health as unknown as Record<string, (...a: unknown[]) => void>)["Check"]!.bind(health);
    fn({ service }, { deadline: Date.now() + 10_000 }, (err: grpc.ServiceError | null, res: HealthResponse) => (err ? reject(err) : resolve(res)));
  });
}

function watch(service: string): grpc.ClientReadableStream<HealthResponse> {
  const fn = (health as unknown as Record<string, (...a: unknown[]) => grpc.ClientReadableStream<HealthResponse>>)["Watch"]!.bind(health);
  return fn({ service });
}

describe("grpc.health.v1.Health", () => {
  it("Check of the empty service name: SERVING", async () => {
    expect(await check("")).toEqual({ status: "SERVING" });
  });

  it("Check of any other name: NOT_FOUND 'unknown service'", async () => {
    for (const name of ["etcdserverpb.KV", "nothing"]) {
      const err = (await check(name).then(
        () => undefined,
        (e: unknown) => e,
      )) as grpc.ServiceError;
      expect([err.code, err.details]).toEqual([grpc.status.NOT_FOUND, "unknown service"]);
    }
  });

  it("Watch: the current status at once, then the stream stays open; an unknown name: SERVICE_UNKNOWN", async () => {
    for (const [name, status] of [
      ["", "SERVING"],
      ["nothing", "SERVICE_UNKNOWN"],
    ] as const) {
      const stream = watch(name);
      const seen: HealthResponse[] = [];
      let ended = false;
      stream.on("data", (r: HealthResponse) => seen.push(r));
      stream.on("end", () => (ended = true));
      stream.on("error", () => (ended = true));
      const deadline = Date.now() + 10_000;
      while (seen.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));
      expect(seen).toEqual([{ status }]);
      expect(ended).toBe(false);
      stream.cancel();
    }
  });
});
