import net from "node:net";
import { afterEach } from "vitest";
import type { GrpcServer } from "../../../src/grpc/server.js";
import type { RawH2Client } from "./raw_client.js";

/**
 * Records every buffer written to a socket whose local port is `port` (a server's side of its
 * client connections), for tests that count the server's writes. Returns the list and the undo.
 */
export function recordServerWrites(port: number): { writes: Buffer[]; restore: () => void } {
  const writes: Buffer[] = [];
  const original = net.Socket.prototype.write;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  net.Socket.prototype.write = function (this: net.Socket, chunk: unknown, ...rest: any[]): boolean {
    if (this.localPort === port && Buffer.isBuffer(chunk)) writes.push(Buffer.from(chunk));
    return original.call(this, chunk as Buffer, ...rest);
  } as typeof original;
  return { writes, restore: () => (net.Socket.prototype.write = original) };
}

/**
 * What a test of the server's writes opens, torn down after each test (call inside a describe):
 * the servers, the raw clients, and the undo of recordServerWrites.
 */
export function writesFixture(): { servers: GrpcServer[]; clients: RawH2Client[]; restore: Array<() => void> } {
  const f = { servers: [] as GrpcServer[], clients: [] as RawH2Client[], restore: [] as Array<() => void> };
  afterEach(async () => {
    for (const r of f.restore.splice(0)) r();
    for (const c of f.clients.splice(0)) c.close();
    await Promise.all(f.servers.splice(0).map((s) => s.close(100)));
  });
  return f;
}
