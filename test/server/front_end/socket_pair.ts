/** A connected pair of loopback sockets for the front-end pipe tests, closed after each test. */
import net from "node:net";
import { afterEach } from "vitest";

const sockets: net.Socket[] = [];
let server: net.Server | undefined;

afterEach(() => {
  for (const s of sockets.splice(0)) s.destroy();
  server?.close();
  server = undefined;
});

/** [the accepted side, the dialing side] of one TCP connection on 127.0.0.1. */
export async function socketPair(): Promise<[net.Socket, net.Socket]> {
  const srv = net.createServer();
  server = srv;
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  const accepted = new Promise<net.Socket>((r) => srv.once("connection", r));
  const client = net.connect((srv.address() as net.AddressInfo).port, "127.0.0.1");
  const core = await accepted;
  sockets.push(client, core);
  return [core, client];
}
