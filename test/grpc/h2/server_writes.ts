import net from "node:net";

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
