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

/** The index in `endpoints` of the member that is leader (asked of the first that answers). */
export async function leaderIndex(endpoints: string[]): Promise<number> {
  const ids: string[] = [];
  let leader = "0";
  for (const ep of endpoints) {
    const c = new Conn([ep]);
    try {
      await c.waitReady(5000);
      const st = decode("StatusResponse", await c.unary(METHODS.status, encode("StatusRequest", {})), true);
      const header = st.header as { member_id?: unknown } | undefined;
      ids.push(String(header?.member_id ?? ""));
      if (String(st.leader) !== "0") leader = String(st.leader);
    } finally {
      c.close();
    }
  }
  const i = ids.indexOf(leader);
  if (i < 0) throw new Error(`no member is leader ${leader} (members ${ids.join(", ")})`);
  return i;
}
