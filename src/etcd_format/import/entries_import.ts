/**
 * The entries of etcd's WAL after the backend's consistent index, as etcetera's entries: etcetera's
 * applier applies them on the first start, as etcd would have on its next one.
 *
 * - A normal entry is etcd's InternalRaftRequest, the message etcetera's entries carry too. Its
 *   request id (and the header's) only wakes the proposer's waiting call, and nobody waits after an
 *   import: it becomes the entry's index, which fits etcetera's ids. The request is then decoded
 *   with etcetera's codec and encoded again: a field etcetera does not know, or a value it cannot
 *   hold exactly, changes the bytes, and the import is refused naming the
 *   entry, never applied differently.
 * - etcd 3.4 publishes a starting member's name and client URLs as a v2 request (a bare
 *   etcdserverpb.Request, not an InternalRaftRequest: PUT /0/members/<id>/attributes with the
 *   attributes as JSON). Its backend holds the consistent index of v3 writes only, so a member
 *   restarted and stopped with no write since leaves its publish after that index. It becomes
 *   etcetera's own publish (InternalRaftRequest.member_attributes, etcd 3.5's
 *   ClusterMemberAttrSet). Every other v2 request (etcd's v2 API, the cluster version) is refused.
 * - A conf change carries etcd's member JSON as its context; etcetera's carries its own context
 *   (conf_change_context.ts): the member is carried over, the ids narrowed exactly.
 * - An empty normal entry (a new leader's no-op) stays as it is.
 */
import { encodeConfChangeV1 } from "../../raft/confchange_codec.js";
import { ConfChangeType, EntryType, type Entry } from "../../raft/types.js";
import { encodeConfChangeContext } from "../../server/conf_change_context.js";
import { decodeRaftRequest, encodeRaftRequest } from "../../server/raft_request.js";
import { expectBytes, ProtoFieldError, ProtoFieldWriter, protoFields } from "../proto_fields.js";
import {
  decodeEtcdConfChange,
  ETCD_CONF_ADD_LEARNER_NODE,
  ETCD_CONF_ADD_NODE,
  ETCD_CONF_REMOVE_NODE,
  ETCD_CONF_UPDATE_NODE,
  ETCD_ENTRY_CONF_CHANGE,
  ETCD_ENTRY_NORMAL,
  type EtcdEntry,
} from "../raft_records.js";
import { decodeMember } from "../records.js";
import { ImportRefusedError, importNodeId } from "./ids.js";

/** InternalRaftRequest field numbers. */
const REQUEST_ID_FIELD = 1;
const V2_FIELD = 2;
const HEADER_FIELD = 100;

const CONF_TYPES: Record<number, ConfChangeType> = {
  [ETCD_CONF_ADD_NODE]: ConfChangeType.AddNode,
  [ETCD_CONF_REMOVE_NODE]: ConfChangeType.RemoveNode,
  [ETCD_CONF_UPDATE_NODE]: ConfChangeType.UpdateNode,
  [ETCD_CONF_ADD_LEARNER_NODE]: ConfChangeType.AddLearnerNode,
};

/** The request with its ids (top level and header) set to `id`, every other field as it was. */
function withRequestId(data: Uint8Array, id: number): Buffer {
  const w = new ProtoFieldWriter();
  for (const f of protoFields(data)) {
    if (f.field === REQUEST_ID_FIELD) continue;
    if (f.field === V2_FIELD) throw new ProtoFieldError("an etcd v2 request (InternalRaftRequest.v2)");
    if (f.wire !== 0 && f.wire !== 2) throw new ProtoFieldError(`field ${f.field}: fixed-width wire type ${f.wire} unexpected in an InternalRaftRequest`);
    if (f.field === HEADER_FIELD) {
      const h = new ProtoFieldWriter().uint(1, id);
      for (const hf of protoFields(expectBytes(f, "RequestHeader"))) {
        if (hf.field === 1) continue;
        if (hf.wire === 0) h.uint(hf.field, hf.varint);
        else if (hf.wire === 2) h.bytesField(hf.field, hf.bytes);
        else throw new ProtoFieldError(`RequestHeader field ${hf.field}: wire type ${hf.wire}`);
      }
      w.bytesField(HEADER_FIELD, h.finish(), true);
    } else if (f.wire === 0) w.uint(f.field, f.varint);
    else w.bytesField(f.field, f.bytes, true);
  }
  // Field order: ID first, then the rest in their order (gogoproto's and protobufjs's: by number).
  return Buffer.concat([new ProtoFieldWriter().uint(REQUEST_ID_FIELD, id).finish(), w.finish()]);
}

function normalEntry(e: EtcdEntry): Entry {
  if (e.data.length === 0) return { term: e.term, index: e.index, type: EntryType.Normal, data: new Uint8Array(0) };
  let rewritten: Buffer;
  try {
    rewritten = withRequestId(e.data, e.index);
  } catch (err) {
    if (!(err instanceof ProtoFieldError)) throw err;
    throw new ImportRefusedError(`etcd WAL entry ${e.index} (term ${e.term}) is not an InternalRaftRequest etcetera can apply (${err.message}): start etcd 3.4 on this data dir once and stop it cleanly, so its backend holds every committed entry, then import again`);
  }
  const decoded = (() => {
    try {
      return decodeRaftRequest(rewritten);
    } catch (err) {
      throw new ImportRefusedError(`etcd WAL entry ${e.index} (term ${e.term}) does not decode as an InternalRaftRequest: ${(err as Error).message}`);
    }
  })();
  const again = encodeRaftRequest({ ...decoded, ID: e.index });
  if (!again.equals(rewritten)) {
    throw new ImportRefusedError(
      `etcd WAL entry ${e.index} (term ${e.term}) holds a request etcetera would apply differently (a field it does not know, or a 64-bit value it cannot hold exactly): ${rewritten.toString("hex").slice(0, 200)}`,
    );
  }
  return { term: e.term, index: e.index, type: EntryType.Normal, data: rewritten };
}

function confChangeEntry(e: EtcdEntry): Entry {
  let cc;
  try {
    cc = decodeEtcdConfChange(e.data);
  } catch (err) {
    throw new ImportRefusedError(`etcd WAL entry ${e.index}: ConfChange does not decode: ${(err as Error).message}`);
  }
  const nodeId = importNodeId(cc.nodeId, `conf change at entry ${e.index}: member id`);
  let context: Uint8Array = new Uint8Array(0);
  if (cc.context.length > 0) {
    let m;
    let isPromote = false;
    try {
      m = decodeMember(cc.context);
      isPromote = (JSON.parse(Buffer.from(cc.context).toString()) as { isPromote?: unknown }).isPromote === true;
    } catch (err) {
      throw new ImportRefusedError(`etcd WAL entry ${e.index}: conf change context is not etcd's member JSON: ${(err as Error).message}`);
    }
    const member = { id: importNodeId(m.id, `conf change at entry ${e.index}: member id`), name: m.name, peerUrls: [...m.peerURLs], clientUrls: [...m.clientURLs], isLearner: m.isLearner };
    context = encodeConfChangeContext({ requestId: 0, member, isPromote });
  }
  const type = CONF_TYPES[cc.type]!;
  return { term: e.term, index: e.index, type: EntryType.ConfChange, data: encodeConfChangeV1({ id: cc.id, type, nodeId, context }) };
}

/** pb.Request's fields that a publish leaves at their zero values (gogoproto writes them all). */
const V2_ZERO_FIELDS = new Set([5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17]);
const V2_ATTRIBUTES_PATH = /^\/0\/members\/([0-9a-f]{1,16})\/attributes$/;

/**
 * etcd 3.4's publish (a bare v2 pb.Request: ID 1, Method 2, Path 3, Val 4, the rest zero) as
 * etcetera's; undefined when the entry is not one. Recognised only in full: any other field, or a
 * field with a value a publish never has, leaves it to normalEntry (which refuses a v2 request).
 */
function v2PublishEntry(e: EtcdEntry): Entry | undefined {
  let method: string | undefined;
  let path: string | undefined;
  let val: string | undefined;
  try {
    for (const f of protoFields(e.data)) {
      if (f.field === 1 && f.wire === 0) continue;
      if (f.field === 2 && f.wire === 2) method = Buffer.from(f.bytes).toString();
      else if (f.field === 3 && f.wire === 2) path = Buffer.from(f.bytes).toString();
      else if (f.field === 4 && f.wire === 2) val = Buffer.from(f.bytes).toString();
      else if (V2_ZERO_FIELDS.has(f.field) && ((f.wire === 0 && f.varint === 0n) || (f.wire === 2 && f.bytes.length === 0))) continue;
      else return undefined;
    }
  } catch (err) {
    if (err instanceof ProtoFieldError) return undefined;
    throw err;
  }
  const id = path === undefined ? null : V2_ATTRIBUTES_PATH.exec(path);
  if (method !== "PUT" || id === null || val === undefined) return undefined;
  let attrs: { name?: unknown; clientURLs?: unknown };
  try {
    attrs = JSON.parse(val) as typeof attrs;
  } catch (err) {
    throw new ImportRefusedError(`etcd WAL entry ${e.index}: the attributes published for member ${id[1]} are not JSON: ${(err as Error).message}`);
  }
  const urls = attrs.clientURLs ?? [];
  if (typeof attrs.name !== "string" || !Array.isArray(urls) || !urls.every((u): u is string => typeof u === "string") || Object.keys(attrs).some((k) => k !== "name" && k !== "clientURLs")) {
    throw new ImportRefusedError(`etcd WAL entry ${e.index}: the attributes published for member ${id[1]} are not etcd's {name, clientURLs}: ${val.slice(0, 200)}`);
  }
  const member_ID = importNodeId(BigInt(`0x${id[1]}`), `publish at entry ${e.index}: member id`);
  const data = encodeRaftRequest({ ID: e.index, memberAttributes: { member_ID, name: attrs.name, clientUrls: urls } });
  return { term: e.term, index: e.index, type: EntryType.Normal, data };
}

/** etcd's entries as etcetera's, in order; refuses what etcetera cannot apply exactly. */
export function importEntries(entries: readonly EtcdEntry[]): Entry[] {
  return entries.map((e) => {
    if (e.type === ETCD_ENTRY_NORMAL) return v2PublishEntry(e) ?? normalEntry(e);
    if (e.type === ETCD_ENTRY_CONF_CHANGE) return confChangeEntry(e);
    throw new ImportRefusedError(`etcd WAL entry ${e.index} is a ConfChangeV2 (joint consensus), which etcd 3.4's server never proposes: refusing to import it`);
  });
}
