/**
 * The set-up of a suite that needs one member and its gRPC clients: a cluster of one started in
 * beforeAll and destroyed in afterAll (E2E_TARGET picks etcetera or etcd, as Cluster does).
 */
import { afterAll, beforeAll } from "vitest";
import { clients } from "./grpc_client.js";
import { Cluster } from "./harness.js";

export interface OneMember {
  readonly cluster: Cluster;
  /** The member's gRPC clients (kv, lease, maintenance, ...). */
  readonly c: ReturnType<typeof clients>;
}

/** Registers the suite's beforeAll/afterAll; the fields are set once beforeAll has run. */
export function oneMemberSuite(): OneMember {
  const suite = {} as { cluster: Cluster; c: ReturnType<typeof clients> };
  beforeAll(async () => {
    suite.cluster = await Cluster.create({ size: 1 });
    await suite.cluster.start();
    suite.c = clients(suite.cluster.members[0]!.endpoint);
  });
  afterAll(async () => {
    suite.c?.close();
    await suite.cluster?.destroy();
  });
  return suite;
}
