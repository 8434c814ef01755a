/**
 * The etcd-format protobuf reader's varints: a field's varint and a packed run's elements go
 * through one reader, so both keep all 64 bits and refuse a truncated or over-long varint with
 * the name of what they were reading.
 */
import { describe, expect, it } from "vitest";
import { decodeEtcdConfState } from "../../src/etcd_format/raft_records.js";
import { packedVarints, ProtoFieldError, ProtoFieldWriter, protoFields } from "../../src/etcd_format/proto_fields.js";

/** Go's binary.PutUvarint. */
function uvarint(v: bigint): number[] {
  const out: number[] = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return out;
}

const IDS = [1n, 0x7fn, 0x80n, (1n << 49n) - 1n, 1n << 49n, 0x694d7b1a2c5e3f04n, (1n << 64n) - 1n];

describe("etcd-format varints", () => {
  it("a packed run reads every element exactly, as the unpacked field does", () => {
    const packed = Uint8Array.from(IDS.flatMap(uvarint));
    expect(packedVarints(packed, "ConfState.voters")).toEqual(IDS);
    const unpacked = new ProtoFieldWriter();
    for (const id of IDS) unpacked.uint(1, id);
    expect([...protoFields(unpacked.finish())].map((f) => (f.wire === 0 ? f.varint : undefined))).toEqual(IDS);
    const asPacked = new ProtoFieldWriter().bytesField(1, packed).finish();
    expect(decodeEtcdConfState(asPacked).voters).toEqual(IDS);
    expect(decodeEtcdConfState(unpacked.finish()).voters).toEqual(IDS);
  });

  it("a truncated or over-long packed element is refused, naming the field", () => {
    expect(() => packedVarints(Uint8Array.from([0x01, 0x80]), "ConfState.voters")).toThrow(new ProtoFieldError("ConfState.voters: truncated packed varint"));
    const eleven = Uint8Array.from([...Array<number>(10).fill(0xff), 0x01]);
    expect(() => packedVarints(eleven, "ConfState.learners")).toThrow(new ProtoFieldError("ConfState.learners: packed varint longer than 10 bytes"));
    expect(() => [...protoFields(Uint8Array.from([0x08, ...eleven]))]).toThrow(new ProtoFieldError("varint longer than 10 bytes"));
    expect(() => [...protoFields(Uint8Array.from([0x08, 0x80]))]).toThrow(new ProtoFieldError("truncated varint"));
  });
});
