/**
 * Protobuf's JSON mapping as etcd's gateway speaks it (grpc-gateway's JSONPb with OrigName, no
 * EmitDefaults, over golang/protobuf's jsonpb), driven by the proto descriptors:
 *   - out: proto field names ("cluster_id", "dbSize": the names as the .proto writes them), in
 *     declaration order; default scalars, empty repeated fields and absent messages left out; a
 *     set oneof member always shown; 64-bit integers as strings, bytes as base64, enums by name;
 *     strings escaped as Go's json.Marshal does (<, >, & as \u003c, \u003e, \u0026);
 *   - in: a field by its proto name or its lowerCamelCase JSON name; unknown fields ignored;
 *     `null` leaves the default; numbers as numbers or strings; enums by name or number; bytes
 *     base64; the errors in Go's words.
 * Messages on our side are the member codecs' camelCase objects (src/pb/member-types.ts).
 */

import protobuf from "protobufjs";
import { isExactInt64Field, isId64Field } from "../pb/id_fields.js";
import { decodeGoBase64 } from "./go_base64.js";
import { JsonNumber, type JsonObject, type JsonValue, jsonKind, parseJsonBody, JsonSyntaxError, quoteChar } from "./go_json.js";

/** A request body that does not map onto the message; the message is what etcd's gateway says. */
export class JsonMappingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JsonMappingError";
  }
}

type Message = Record<string, unknown>;

const INT64_TYPES = new Set(["int64", "sint64", "sfixed64"]);
const UINT64_TYPES = new Set(["uint64", "fixed64"]);
const INT32_TYPES = new Set(["int32", "sint32", "sfixed32"]);
const UINT32_TYPES = new Set(["uint32", "fixed32"]);
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;

/** Go's type name of a scalar field, as its unmarshal errors say it. */
function goTypeName(f: protobuf.Field): string {
  if (f.resolvedType instanceof protobuf.Enum) return goEnumName(f.resolvedType);
  if (f.type === "bytes") return "[]uint8";
  if (INT64_TYPES.has(f.type)) return "int64";
  if (UINT64_TYPES.has(f.type)) return "uint64";
  if (INT32_TYPES.has(f.type)) return "int32";
  if (UINT32_TYPES.has(f.type)) return "uint32";
  if (f.type === "double") return "float64";
  if (f.type === "float") return "float32";
  return f.type;
}

/** "etcdserverpb.RangeRequest_SortOrder": the Go package and the nested names joined by "_". */
function goEnumName(e: protobuf.Enum): string {
  const names: string[] = [];
  let o: protobuf.ReflectionObject | null = e;
  let pkg = "";
  while (o !== null && o.parent !== null) {
    if (o instanceof protobuf.Type || o instanceof protobuf.Enum) names.unshift(o.name);
    else if (o instanceof protobuf.Namespace) {
      pkg = o.fullName.slice(1);
      break;
    }
    o = o.parent;
  }
  return pkg === "" ? names.join("_") : `${pkg}.${names.join("_")}`;
}

function typeError(value: string, goType: string): JsonMappingError {
  return new JsonMappingError(`json: cannot unmarshal ${value} into Go value of type ${goType}`);
}

/** Go's json.Marshal string: JSON escapes plus <, >, &, U+2028, U+2029 as \u escapes. */
export function goJsonString(s: string): string {
  return JSON.stringify(s).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** An integer field's text, exact for the doubles the codecs hold. */
function integerText(v: number | bigint): string {
  if (typeof v === "bigint") return v.toString(); // id fields (src/pb/id_fields.ts): exact
  return Number.isSafeInteger(v) ? String(v) : BigInt(Math.trunc(v)).toString();
}

interface FieldInfo {
  readonly field: protobuf.Field;
  /** The member codecs' property name (protobufjs's camelCase). */
  readonly member: string;
  /** JSON names accepted in requests. */
  readonly names: readonly string[];
}

/** The JSON mapping of the messages of a set of protos. */
export class JsonMapping {
  private readonly fields = new Map<protobuf.Type, FieldInfo[]>();
  private readonly lookup = new Map<protobuf.Type, Map<string, FieldInfo>>();

  constructor(private readonly root: protobuf.Root) {
    root.resolveAll();
  }

  static load(protoDir: string, files: readonly string[]): JsonMapping {
    const root = new protobuf.Root();
    const dir = protoDir.endsWith("/") ? protoDir : protoDir + "/";
    root.resolvePath = (_origin, target) => (target.startsWith("/") ? target : dir + target);
    root.loadSync([...files], { keepCase: true });
    return new JsonMapping(root);
  }

  private type(typeName: string): protobuf.Type {
    return this.root.lookupType(typeName);
  }

  private infos(t: protobuf.Type): FieldInfo[] {
    let infos = this.fields.get(t);
    if (infos === undefined) {
      infos = t.fieldsArray.map((field) => {
        field.resolve();
        const member = protobuf.util.camelCase(field.name);
        const json = jsonName(field.name);
        return { field, member, names: json === field.name ? [field.name] : [field.name, json] };
      });
      this.fields.set(t, infos);
      const byName = new Map<string, FieldInfo>();
      for (const info of infos) for (const n of info.names) byName.set(n, info);
      this.lookup.set(t, byName);
    }
    return infos;
  }

  // ---- out ----

  /** The JSON text of a decoded message of type `typeName`. */
  stringify(typeName: string, msg: object): string {
    return this.messageJson(this.type(typeName), msg as Message);
  }

  private messageJson(t: protobuf.Type, msg: Message): string {
    const parts: string[] = [];
    for (const info of this.infos(t)) {
      const f = info.field;
      const v = msg[info.member];
      if (v === undefined || v === null) continue;
      if (f.repeated) {
        const list = v as unknown[];
        if (list.length === 0) continue;
        parts.push(`${goJsonString(f.name)}:[${list.map((x) => this.valueJson(f, x)).join(",")}]`);
        continue;
      }
      if (!f.partOf && !(f.resolvedType instanceof protobuf.Type) && isDefault(f, v)) continue;
      parts.push(`${goJsonString(f.name)}:${this.valueJson(f, v)}`);
    }
    return `{${parts.join(",")}}`;
  }

  private valueJson(f: protobuf.Field, v: unknown): string {
    const rt = f.resolvedType;
    if (rt instanceof protobuf.Type) return this.messageJson(rt, v as Message);
    if (rt instanceof protobuf.Enum) {
      const name = rt.valuesById[v as number];
      return name === undefined ? String(v) : goJsonString(name);
    }
    if (INT64_TYPES.has(f.type) || UINT64_TYPES.has(f.type)) return `"${integerText(v as number | bigint)}"`;
    if (f.type === "bytes") return `"${Buffer.from(v as Uint8Array).toString("base64")}"`;
    if (f.type === "string") return goJsonString(v as string);
    if (f.type === "bool") return v ? "true" : "false";
    const n = v as number;
    if (Number.isNaN(n)) return '"NaN"';
    if (!Number.isFinite(n)) return n > 0 ? '"Infinity"' : '"-Infinity"';
    return String(n);
  }

  // ---- in ----

  /** Parses a whole request body (Go's "unexpected EOF" when it ends inside a value; empty is `{}`). */
  parseBody(typeName: string, body: string): Message {
    let value: JsonValue | undefined;
    try {
      value = parseJsonBody(body);
    } catch (e) {
      if (e instanceof JsonSyntaxError) throw new JsonMappingError(e.message);
      throw new JsonMappingError("unexpected EOF");
    }
    return value === undefined ? {} : this.fromJson(typeName, value);
  }

  /** The member-codec message (camelCase, encoder-ready) of a parsed JSON value. */
  fromJson(typeName: string, value: JsonValue): Message {
    return this.messageFrom(this.type(typeName), value) ?? {};
  }

  private messageFrom(t: protobuf.Type, value: JsonValue): Message | undefined {
    if (value === null) return undefined;
    if (!(value instanceof Map)) throw typeError(jsonKind(value), "map[string]json.RawMessage");
    this.infos(t);
    const byName = this.lookup.get(t)!;
    const out: Message = {};
    for (const [key, v] of value as JsonObject) {
      const info = byName.get(key);
      if (info === undefined) continue;
      const f = info.field;
      if (v === null) continue;
      if (f.repeated) {
        if (!Array.isArray(v)) throw typeError(jsonKind(v), "[]json.RawMessage");
        out[info.member] = v.map((x) => this.valueFrom(f, x) ?? defaultOf(f));
      } else {
        const x = this.valueFrom(f, v);
        if (x !== undefined) out[info.member] = x;
      }
    }
    return out;
  }

  private valueFrom(f: protobuf.Field, v: JsonValue): unknown {
    const rt = f.resolvedType;
    if (rt instanceof protobuf.Type) return this.messageFrom(rt, v) ?? {};
    if (v === null) return undefined;
    if (rt instanceof protobuf.Enum) {
      if (typeof v === "string") {
        const n = rt.values[v];
        if (n === undefined) throw new JsonMappingError(`unknown value ${goJsonString(v)} for enum ${goEnumName(rt)}`);
        return n;
      }
      return integerFrom(v, goEnumName(rt), -(2n ** 31n), 2n ** 31n - 1n);
    }
    if (f.type === "bytes") {
      if (typeof v !== "string") throw typeError(jsonKind(v), "[]uint8");
      try {
        return decodeGoBase64(v);
      } catch (e) {
        throw new JsonMappingError((e as Error).message);
      }
    }
    if (f.type === "string") {
      if (typeof v !== "string") throw typeError(jsonKind(v), "string");
      return v;
    }
    if (f.type === "bool") {
      if (typeof v !== "boolean") throw typeError(jsonKind(v), "bool");
      return v;
    }
    const goType = goTypeName(f);
    const form = integerForm(f);
    if (INT64_TYPES.has(f.type)) return integerFrom(v, goType, INT64_MIN, INT64_MAX, form);
    if (UINT64_TYPES.has(f.type)) return integerFrom(v, goType, 0n, UINT64_MAX, form);
    if (INT32_TYPES.has(f.type)) return integerFrom(v, goType, -(2n ** 31n), 2n ** 31n - 1n);
    if (UINT32_TYPES.has(f.type)) return integerFrom(v, goType, 0n, 2n ** 32n - 1n);
    // double, float
    const text = numberText(v, goType);
    return Number(text);
  }
}

function isDefault(f: protobuf.Field, v: unknown): boolean {
  if (f.resolvedType instanceof protobuf.Enum) return v === 0;
  switch (f.type) {
    case "bool":
      return v === false;
    case "string":
      return v === "";
    case "bytes":
      return (v as Uint8Array).length === 0;
    default:
      return v === 0 || v === 0n;
  }
}

/** An id field the member codecs hold as a bigint (src/pb/id_fields.ts). */
function isIdField(f: protobuf.Field): boolean {
  return f.parent instanceof protobuf.Type && isId64Field(f.parent.fullName.slice(1), f.id);
}

/**
 * How the member codecs hold an integer field: member/cluster ids as bigints, lease ids exact in
 * one representation (a number while safe, a bigint beyond: ProtoReader.int64Exact), others numbers.
 */
function integerForm(f: protobuf.Field): "number" | "bigint" | "exact" {
  if (!(f.parent instanceof protobuf.Type)) return "number";
  const typeName = f.parent.fullName.slice(1);
  if (isId64Field(typeName, f.id)) return "bigint";
  return isExactInt64Field(typeName, f.id) ? "exact" : "number";
}

function defaultOf(f: protobuf.Field): unknown {
  if (f.resolvedType instanceof protobuf.Type) return {};
  if (f.type === "bytes") return Buffer.alloc(0);
  if (f.type === "string") return "";
  if (f.type === "bool") return false;
  return isIdField(f) ? 0n : 0;
}

/**
 * jsonpb's rule for numbers: a quoted number loses its quotes and is read as JSON, so `"x"`
 * fails as Go's scanner fails on `x`.
 */
function numberText(v: JsonValue, goType: string): string {
  if (v instanceof JsonNumber) return v.text;
  if (typeof v !== "string") throw typeError(jsonKind(v), goType);
  let inner: JsonValue | undefined;
  try {
    inner = parseJsonBody(v);
  } catch (e) {
    throw new JsonMappingError(e instanceof JsonSyntaxError ? e.message : "unexpected end of JSON input");
  }
  if (inner === undefined) throw new JsonMappingError("unexpected end of JSON input");
  if (!(inner instanceof JsonNumber)) throw typeError(jsonKind(inner), goType);
  const trailing = v.trim().slice(inner.text.length).trim();
  if (trailing !== "") throw new JsonMappingError(`invalid character ${quoteChar(trailing[0]!)} after top-level value`);
  return inner.text;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

function integerFrom(v: JsonValue, goType: string, min: bigint, max: bigint, form: "number" | "bigint" | "exact" = "number"): number | bigint {
  const text = numberText(v, goType);
  if (!/^-?\d+$/.test(text)) throw typeError(`number ${text}`, goType);
  const n = BigInt(text);
  if (n < min || n > max) throw typeError(`number ${text}`, goType);
  if (form === "bigint") return n;
  if (form === "exact" && (n > MAX_SAFE || n < -MAX_SAFE)) return n;
  return Number(n);
}

/** protoc's JSON name: lowerCamelCase of the proto name ("prev_kv" → "prevKv", "ID" stays). */
function jsonName(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}
