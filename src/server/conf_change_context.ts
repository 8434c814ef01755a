/**
 * The context of a membership conf change (etcd's membership.ConfigChangeContext): the member
 * record the change adds or updates, whether an AddNode promotes a learner, and the id of the
 * request waiting for it (etcd's ConfChange.ID) so the member that proposed it can answer its
 * caller once the change is applied. JSON, as etcd's.
 */
import type { Member } from "./member.js";

export interface ConfChangeContext {
  /** The proposing member's wait id (0: nobody waits, e.g. bootstrap). */
  readonly requestId: number;
  readonly member: Member;
  /** An AddNode that turns the learner `member.id` into a voter. */
  readonly isPromote: boolean;
}

interface Wire {
  requestId: number;
  /** The member id as decimal text (exact over 64 bits); entries written before ids were exact hold a number. */
  member: { id: string | number; name: string; peerUrls: string[]; clientUrls: string[]; isLearner: boolean };
  isPromote: boolean;
}

export function encodeConfChangeContext(c: ConfChangeContext): Uint8Array {
  const m = c.member;
  const wire: Wire = {
    requestId: c.requestId,
    member: { id: m.id.toString(), name: m.name, peerUrls: [...m.peerUrls], clientUrls: [...m.clientUrls], isLearner: m.isLearner },
    isPromote: c.isPromote,
  };
  return Buffer.from(JSON.stringify(wire), "utf8");
}

/** undefined for an empty context (bootstrap entries of data written before contexts existed). */
export function decodeConfChangeContext(data: Uint8Array): ConfChangeContext | undefined {
  if (data.length === 0) return undefined;
  const o = JSON.parse(Buffer.from(data).toString("utf8")) as Partial<Wire>;
  const m = o.member;
  if (m === undefined || !isWireId(m.id) || !Array.isArray(m.peerUrls) || typeof o.requestId !== "number") {
    throw new Error("apply: malformed member record in conf change context");
  }
  return {
    requestId: o.requestId,
    member: { id: BigInt(m.id), name: m.name ?? "", peerUrls: m.peerUrls, clientUrls: m.clientUrls ?? [], isLearner: m.isLearner ?? false },
    isPromote: o.isPromote ?? false,
  };
}

/** A decimal uint64 string, or (data written before ids were exact) a safe non-negative integer. */
function isWireId(id: unknown): id is string | number {
  if (typeof id === "number") return Number.isSafeInteger(id) && id >= 0;
  return typeof id === "string" && /^[0-9]{1,20}$/.test(id) && BigInt(id) < 2n ** 64n;
}
