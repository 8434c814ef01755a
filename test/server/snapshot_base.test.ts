/**
 * The leader's base request before a snapshot (issue 19), between real transports over loopback:
 * a member answers its backend's base, one offering none answers nothing, and a peer that predates
 * the request (it refuses the connection kind as an unknown one, closing the connection) or does
 * not answer in time leaves the leader with no base, so it sends the full image.
 */
import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { connectAll, type Node, startNode } from "./transport_helpers.js";

let nodes: Node[] = [];
const servers: net.Server[] = [];
const sockets = new Set<net.Socket>();
afterEach(async () => {
  for (const n of nodes) await n.transport.stop();
  nodes = [];
  for (const s of sockets) s.destroy();
  sockets.clear();
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

const BASE = { consistentIndex: 4321, revision: 77, maxRev: 77 * 2 ** 20 + 3, compactRevision: -1 };

describe("snapshot base request", () => {
  it("a member answers its backend's base; one offering none answers nothing", async () => {
    const asked: bigint[] = [];
    nodes = [
      await startNode(1n),
      await startNode(2n, {
        snapshotBase: (from) => {
          asked.push(from);
          return BASE;
        },
      }),
      await startNode(3n),
    ];
    connectAll(nodes);
    expect(await nodes[0]!.transport.snapshotBase(2n)).toEqual(BASE);
    expect(asked).toEqual([1n]);
    expect(await nodes[0]!.transport.snapshotBase(3n)).toBeUndefined();
    expect(await nodes[0]!.transport.snapshotBase(9n)).toBeUndefined(); // not a peer
  });

  it("a peer that does not know the request (closes at the unknown connection kind), or never answers: no base", async () => {
    nodes = [await startNode(1n)];
    // An old peer: reads the Hello, finds an unknown connection kind, closes (what decodeHello's refusal does).
    const old = net.createServer((s) => {
      sockets.add(s);
      s.once("data", () => s.destroy());
    });
    // A hung peer: accepts and says nothing.
    const hung = net.createServer((s) => sockets.add(s));
    for (const s of [old, hung]) {
      servers.push(s);
      await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
    }
    nodes[0]!.transport.addPeer(5n, [`http://127.0.0.1:${(old.address() as net.AddressInfo).port}`]);
    nodes[0]!.transport.addPeer(6n, [`http://127.0.0.1:${(hung.address() as net.AddressInfo).port}`]);
    expect(await nodes[0]!.transport.snapshotBase(5n)).toBeUndefined();
    const started = performance.now();
    expect(await nodes[0]!.transport.snapshotBase(6n)).toBeUndefined();
    expect(performance.now() - started).toBeLessThan(20_000);
    expect(nodes[0]!.lines.some((l) => l.msg === "peer told no snapshot base; sending a full image")).toBe(true);
  });
});
