/**
 * A watch that starts before the compaction revision is dropped with etcd's compaction response;
 * after a Compact at revision 0 that response carries compact_revision 0 and, as etcd's sendLoop
 * derives `canceled` from a non-zero compact revision, canceled false (an etcd edge the RPC fuzzer
 * found: etcetera said canceled true). The dropped watcher stays known to its stream: a cancel
 * request for it is answered (etcetera forgot it and answered nothing). E2E_TARGET=etcd checks the
 * expectations against etcd.
 */
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clients, unary } from "./grpc_client.js";
import { Cluster } from "./harness.js";

let cluster: Cluster;
let c: ReturnType<typeof clients>;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  c = clients(cluster.members[0]!.endpoint);
});
afterAll(async () => {
  c?.close();
  await cluster?.destroy();
});

interface Resp {
  watch_id: string;
  created: boolean;
  canceled: boolean;
  compact_revision: string;
  header: { revision: string };
}

describe("watch from before the compaction revision", () => {
  it("after Compact(0), a watch from revision -1 gets compact_revision 0, header revision 0, canceled false; its cancel is answered", async () => {
    await unary(c.kv, "Put", { key: Buffer.from("z"), value: Buffer.from("1") });
    await unary(c.kv, "Compact", { revision: "0" });
    const call = (c.watch as unknown as Record<string, (m: grpc.Metadata) => grpc.ClientDuplexStream<unknown, Resp>>).Watch!.call(
      c.watch,
      new grpc.Metadata(),
    );
    const got: Resp[] = [];
    call.on("error", () => {});
    const waiters: Array<[number, () => void]> = [];
    const responses = (n: number) => new Promise<void>((resolve) => (got.length >= n ? resolve() : waiters.push([n, resolve])));
    call.on("data", (r: Resp) => {
      got.push(r);
      for (const [n, resolve] of waiters) if (got.length >= n) resolve();
    });
    call.write({ create_request: { key: Buffer.from("z"), start_revision: "-1" } });
    await responses(2);
    call.write({ cancel_request: { watch_id: "0" } });
    await responses(3);
    call.cancel();
    expect(got.map((r) => [r.watch_id, r.created, r.canceled, r.compact_revision])).toEqual([
      ["0", true, false, "0"],
      ["0", false, false, "0"],
      ["0", false, true, "0"],
    ]);
    expect(got[1]!.header.revision).toBe("0");
  });
});
