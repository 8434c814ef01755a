/**
 * --target-leader, as etcd's benchmark does it: MemberList from the given endpoints, then
 * Status on each member's client URL; the member whose Status says it is the leader wins.
 */
import { Conn } from "./conn.js";
import { METHODS, decode, encode, list, sub } from "./proto.js";

export async function findLeader(endpoints: string[], dialTimeoutMs: number): Promise<string> {
  const any = new Conn(endpoints);
  let clientUrls: string[];
  try {
    await any.waitReady(dialTimeoutMs);
    const members = list(decode("MemberListResponse", await any.unary(METHODS.memberList, encode("MemberListRequest", {}))), "members");
    clientUrls = members.map((m) => (m.clientURLs as string[] | undefined)?.[0] ?? "").filter((u) => u !== "");
  } finally {
    any.close();
  }
  for (const url of clientUrls) {
    const c = new Conn([url]);
    try {
      await c.waitReady(dialTimeoutMs);
      const st = decode("StatusResponse", await c.unary(METHODS.status, encode("StatusRequest", {})), true);
      const self = String(sub(st, "header").member_id);
      if (self !== "0" && self === String(st.leader)) return url;
    } catch {
      // An unreachable member cannot be the leader we load; try the next one.
    } finally {
      c.close();
    }
  }
  throw new Error(`no leader among ${clientUrls.join(", ")}`);
}
