/**
 * A request path that names no method gets grpc-go's answer (etcd 3.4 serves gRPC with grpc-go):
 * a path with no "/" after its leading one is malformed, RESOURCE_EXHAUSTED `malformed method
 * name: "<path>"`; any other is split at its last "/" and answered UNIMPLEMENTED naming the unknown
 * service or method. Raw HTTP/2, so the exact path reaches the server; E2E_TARGET=etcd runs the
 * same expectations against real etcd 3.4.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { grpcFrame, RawH2Client } from "../fuzz/h2_raw.js";
import { Cluster } from "./harness.js";

let cluster: Cluster;
let client: RawH2Client;

beforeAll(async () => {
  cluster = await Cluster.create({ size: 1 });
  await cluster.start();
  client = new RawH2Client(cluster.members[0]!.endpoint);
});

afterAll(async () => {
  client?.close();
  await cluster?.destroy();
});

async function answer(path: string): Promise<string> {
  const o = await client.call({ path, chunks: [grpcFrame(Buffer.alloc(0))], waitMs: 10_000 });
  return o.kind === "status" ? `${o.code} ${o.message}` : o.kind;
}

describe("paths that name no method", () => {
  it("a path without a method is malformed: RESOURCE_EXHAUSTED with the path quoted", async () => {
    expect(await answer("/etcdserverpb.KV")).toBe('8 malformed method name: "/etcdserverpb.KV"');
    expect(await answer("/")).toBe('8 malformed method name: "/"');
    expect(await answer('/a"b\\c')).toBe('8 malformed method name: "/a\\"b\\\\c"');
  });

  it("an unknown service or method is UNIMPLEMENTED, split at the last slash", async () => {
    expect(await answer("/etcdserverpb.KV/Nope")).toBe("12 unknown method Nope for service etcdserverpb.KV");
    expect(await answer("/nope.Service/Range")).toBe("12 unknown service nope.Service");
    expect(await answer("/etcdserverpb.KV/Range/x")).toBe("12 unknown service etcdserverpb.KV/Range");
    // An empty service name: the message is "unknown service " on both, a header value ending in a
    // space, which Node's HTTP/2 client (nghttp2, RFC 9113 8.2.1) drops: no message arrives.
    expect(await answer("//Range")).toBe("12 ");
  });
});
