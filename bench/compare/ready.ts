/** Readiness probe: a member is ready when its Status names a leader. */
import { Conn } from "../benchmark/conn.js";
import { METHODS, decode, encode } from "../benchmark/proto.js";

export async function hasLeader(endpoint: string): Promise<boolean> {
  const c = new Conn([endpoint]);
  try {
    await c.waitReady(1000);
    const st = decode("StatusResponse", await c.unary(METHODS.status, encode("StatusRequest", {})), true);
    return String(st.leader) !== "0";
  } finally {
    c.close();
  }
}
