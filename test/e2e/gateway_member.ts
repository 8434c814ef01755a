/**
 * The one-member cluster a gateway test file asks: started before the file's tests, destroyed
 * after them, and the response header both targets give on a fresh single member.
 */
import { afterAll, beforeAll } from "vitest";
import { Cluster, type Member } from "./harness.js";

export interface GatewayMember {
  /** host:port of the member's client URL (valid once the file's tests run). */
  readonly endpoint: string;
  readonly member: Member;
}

/** Registers the file's beforeAll/afterAll; read the fields inside tests only. */
export function useGatewayMember(): GatewayMember {
  let cluster: Cluster | undefined;
  const started = (): Member => {
    if (cluster === undefined) throw new Error("the gateway member is read before beforeAll started it");
    return cluster.members[0]!;
  };
  beforeAll(async () => {
    cluster = await Cluster.create({ size: 1 });
    await cluster.start();
  });
  afterAll(async () => {
    await cluster?.destroy();
  });
  return {
    get endpoint() {
      return started().endpoint;
    },
    get member() {
      return started();
    },
  };
}

/** The header of a fresh single member's answers, ids normalized by normalizeIds. */
export const gatewayHeader = (revision: string) => ({ cluster_id: "<id>", member_id: "<id>", revision, raft_term: "2" });
