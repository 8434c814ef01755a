/**
 * Message codecs compiled from the .proto files.
 *
 * The protos are parsed once with protobufjs (reflection only); for every message
 * type we then generate a decoder and an encoder specialised to its fields. Why
 * generated code and not protobufjs's own encode/decode: protobufjs yields Long
 * objects for 64-bit fields and message instances whose defaults live on the
 * prototype, and switching it to numbers means mutating its global `util.Long`
 * (shared with grpc-js's proto-loader). The generated code produces plain objects
 * with a stable shape: every proto3 field present with its default, `bytes` as
 * Buffer views of the input, 64-bit integers and enums as numbers, absent message
 * fields and unset oneof members `undefined`, and the oneof's name holding the
 * name of the member that is set. Property names are the proto field names
 * (snake_case, as etcd's JSON uses).
 *
 * Why the code is compiled at run time (`new Function`, once per ProtoCodecs.load)
 * and not interpreted from a field table: every request and response of the client
 * port goes through here, and a specialised function per message type is straight
 * code with constant tags in a `switch` and a fixed object literal, so V8 keeps each
 * decoded message in one hidden class and inlines the reader calls; a table-driven
 * loop pays a descriptor lookup and a type dispatch per field and builds objects
 * property by property. protobufjs's own fast path is generated code for the same
 * reason. The source is built only from the parsed .proto files (field names go
 * through JSON.stringify, tags are numbers), never from request bytes. Generating it
 * at build time instead (as typegen.ts does for the types) would drop the run-time
 * step but not the code; the test fixtures load their own protos at run time, so the
 * compiler stays here.
 */

import protobuf from "protobufjs";
import { isExactInt64Field, isId64Field } from "./id_fields.js";
import { EMPTY_BYTES, ProtoReader, ProtoWriter, WireError } from "./wire.js";

/** Encoder/decoder of one message type: `T` as decoded, `Init` as given to the encoder (Foo, FooInit in the generated types). */
export interface MessageCodec<T, Init = T> {
  /** Fully-qualified name, e.g. "etcdserverpb.RangeRequest". */
  readonly typeName: string;
  /** Decodes a whole buffer (throws WireError on malformed input). */
  decode(buf: Buffer): T;
  /** Encodes to a fresh buffer. */
  encode(msg: Init): Buffer;
  /** Encodes with the 5-byte gRPC message prefix (uncompressed) in front. */
  encodeFramed(msg: Init): Buffer;
}

/** One RPC of a service, as described by the proto. */
export interface MethodDescriptor {
  /** The HTTP/2 :path, e.g. "/etcdserverpb.KV/Range". */
  readonly path: string;
  /** "etcdserverpb.KV" */
  readonly service: string;
  /** "Range" */
  readonly name: string;
  readonly requestStream: boolean;
  readonly responseStream: boolean;
  readonly request: MessageCodec<unknown>;
  readonly response: MessageCodec<unknown>;
}

export interface ProtoLoadOptions {
  /** Directory the import paths are relative to. */
  protoDir: string;
  /** Files to load, relative to protoDir. */
  files: readonly string[];
  /**
   * Property names: the proto field names as written (true, the default: snake_case as etcd's
   * JSON) or protobufjs's camelCase (false: `range_end` → `rangeEnd`), which the server's
   * TypeScript types use so decoded requests pass straight into the stores.
   */
  keepCase?: boolean;
}

const GRPC_PREFIX_BYTES = 5;
/** Upper bound of the first buffer allocated for an encode; bigger messages grow it. */
const ENCODE_HINT_BYTES_MAX = 64 * 1024;

type DecodeFn = (r: ProtoReader, end: number) => unknown;
type EncodeFn = (m: unknown, w: ProtoWriter) => void;

interface ScalarSpec {
  wireType: number;
  read: string;
  write: string;
  defaultValue: string;
  packable: boolean;
}

const SCALARS: Record<string, ScalarSpec> = {
  double: { wireType: 1, read: "double", write: "double", defaultValue: "0", packable: true },
  float: { wireType: 5, read: "float", write: "float", defaultValue: "0", packable: true },
  int32: { wireType: 0, read: "int32", write: "int32", defaultValue: "0", packable: true },
  uint32: { wireType: 0, read: "uint32", write: "uint32", defaultValue: "0", packable: true },
  sint32: { wireType: 0, read: "sint32", write: "sint32", defaultValue: "0", packable: true },
  fixed32: { wireType: 5, read: "fixed32", write: "fixed32", defaultValue: "0", packable: true },
  sfixed32: { wireType: 5, read: "sfixed32", write: "sfixed32", defaultValue: "0", packable: true },
  int64: { wireType: 0, read: "int64", write: "int64", defaultValue: "0", packable: true },
  uint64: { wireType: 0, read: "uint64", write: "uint64", defaultValue: "0", packable: true },
  sint64: { wireType: 0, read: "sint64", write: "sint64", defaultValue: "0", packable: true },
  fixed64: { wireType: 1, read: "fixed64", write: "fixed64", defaultValue: "0", packable: true },
  sfixed64: { wireType: 1, read: "sfixed64", write: "sfixed64", defaultValue: "0", packable: true },
  bool: { wireType: 0, read: "bool", write: "bool", defaultValue: "false", packable: true },
  string: { wireType: 2, read: "string", write: "string", defaultValue: '""', packable: false },
  bytes: { wireType: 2, read: "bytes", write: "bytes", defaultValue: "EMPTY", packable: false },
};
/** Id fields (id_fields.ts) as exact bigints. The default is written `0n`; `if (v)` skips it as it skips 0. */
const ID64_SCALARS: Record<string, ScalarSpec> = {
  int64: { wireType: 0, read: "int64Big", write: "int64Big", defaultValue: "0n", packable: true },
  uint64: { wireType: 0, read: "uint64Big", write: "uint64Big", defaultValue: "0n", packable: true },
};
/** Lease and watch id fields (id_fields.ts EXACT_INT64): a number while exact, a bigint beyond; 0 is the number 0. */
const EXACT_INT64_SPEC: ScalarSpec = { wireType: 0, read: "int64Exact", write: "int64Exact", defaultValue: "0", packable: true };
const ENUM_SPEC: ScalarSpec = { wireType: 0, read: "int32", write: "int32", defaultValue: "0", packable: true };

function tagOf(id: number, wireType: number): number {
  return id * 8 + wireType;
}

/** Generates the decoder and encoder source of one message type. */
class TypeCompiler {
  private readonly index: Map<protobuf.Type, number>;

  constructor(index: Map<protobuf.Type, number>) {
    this.index = index;
  }

  private fieldsOf(type: protobuf.Type): protobuf.Field[] {
    const fields = [...type.fieldsArray].sort((a, b) => a.id - b.id);
    for (const f of fields) {
      if (f.map) throw new Error(`${type.fullName}.${f.name}: map fields are not supported`);
      f.resolve();
    }
    return fields;
  }

  private messageIndex(f: protobuf.Field): number {
    const t = f.resolvedType;
    if (!(t instanceof protobuf.Type)) throw new Error(`${f.fullName}: not a message field`);
    const i = this.index.get(t);
    if (i === undefined) throw new Error(`${t.fullName}: not compiled`);
    return i;
  }

  private scalarOf(f: protobuf.Field): ScalarSpec | undefined {
    if (f.resolvedType instanceof protobuf.Enum) return ENUM_SPEC;
    if (f.parent instanceof protobuf.Type && isId64Field(f.parent.fullName.slice(1), f.id)) {
      const id = ID64_SCALARS[f.type];
      if (id === undefined) throw new Error(`${f.fullName}: an id field must be int64 or uint64, not ${f.type}`);
      return id;
    }
    if (f.parent instanceof protobuf.Type && isExactInt64Field(f.parent.fullName.slice(1), f.id)) {
      if (f.type !== "int64") throw new Error(`${f.fullName}: a lease or watch id field must be int64, not ${f.type}`);
      return EXACT_INT64_SPEC;
    }
    return SCALARS[f.type];
  }

  decoder(type: protobuf.Type, i: number): string {
    const fields = this.fieldsOf(type);
    const inits: string[] = [];
    const cases: string[] = [];
    const oneofNames = new Set<string>();
    for (const f of fields) {
      const key = JSON.stringify(f.name);
      const scalar = this.scalarOf(f);
      const oneof = f.partOf;
      if (oneof) oneofNames.add(oneof.name);
      if (f.repeated) inits.push(`${key}: []`);
      else if (scalar && !oneof) inits.push(`${key}: ${scalar.defaultValue}`);
      else inits.push(`${key}: undefined`);
      const set = (expr: string): string => {
        if (!oneof) return `m[${key}] = ${expr};`;
        const others = oneof.fieldsArray.filter((o) => o !== f).map((o) => `m[${JSON.stringify(o.name)}] = undefined;`);
        return `${others.join(" ")} m[${key}] = ${expr}; m[${JSON.stringify(oneof.name)}] = ${key};`;
      };
      if (scalar) {
        const read = `r.${scalar.read}()`;
        if (f.repeated) {
          cases.push(`case ${tagOf(f.id, scalar.wireType)}: m[${key}].push(${read}); break;`);
          if (scalar.packable) {
            cases.push(`case ${tagOf(f.id, 2)}: { const e = r.delimited(); while (r.pos < e) m[${key}].push(${read}); if (r.pos !== e) throw new WireError("bad packed field"); break; }`);
          }
        } else {
          cases.push(`case ${tagOf(f.id, scalar.wireType)}: ${set(read)} break;`);
        }
      } else {
        const j = this.messageIndex(f);
        const read = `d${j}(r, r.delimited())`;
        if (f.repeated) cases.push(`case ${tagOf(f.id, 2)}: m[${key}].push(${read}); break;`);
        else cases.push(`case ${tagOf(f.id, 2)}: ${set(read)} break;`);
      }
    }
    for (const name of oneofNames) inits.push(`${JSON.stringify(name)}: undefined`);
    // A declared field arriving with a wire type none of its cases accept is refused, as
    // gogoproto does ("proto: wrong wireType"), rather than skipped as if it were unknown.
    const known = fields.map((f) => `case ${f.id}: throw new WireError("proto: wrong wireType = " + (t & 7) + " for field " + ${JSON.stringify(f.name)});`);
    return `function d${i}(r, end) {
  const m = { ${inits.join(", ")} };
  while (r.pos < end) {
    const t = r.uint32();
    switch (t) {
      ${cases.join("\n      ")}
      default:
        // gogoproto's order and wording: an end-group tag first, then field number 0.
        if ((t & 7) === 4) throw new WireError("proto: ${type.name}: wiretype end group for non-group");
        if (t < 8) throw new WireError("proto: ${type.name}: illegal tag 0 (wire type " + (t & 7) + ")");
        switch (t >>> 3) {
          ${known.join("\n          ")}
        }
        r.skip(t & 7);
    }
  }
  if (r.pos !== end) throw new WireError("field overruns message ${type.fullName}");
  return m;
}`;
  }

  encoder(type: protobuf.Type, i: number): string {
    const fields = this.fieldsOf(type);
    const lines: string[] = ["let v;"];
    for (const f of fields) {
      const key = JSON.stringify(f.name);
      const scalar = this.scalarOf(f);
      lines.push(`v = m[${key}];`);
      if (scalar) {
        const write = (x: string): string => `w.${scalar.write}(${x});`;
        if (f.repeated && scalar.packable) {
          lines.push(`if (v != null && v.length !== 0) { w.uint32(${tagOf(f.id, 2)}); const s = w.beginDelimited(); for (let i = 0; i < v.length; i++) ${write("v[i]")} w.endDelimited(s); }`);
        } else if (f.repeated) {
          lines.push(`if (v != null) for (let i = 0; i < v.length; i++) { w.uint32(${tagOf(f.id, scalar.wireType)}); ${write("v[i]")} }`);
        } else {
          // proto3: default values are not sent, except a oneof member that is set.
          const present = f.partOf ? "v != null" : scalar.wireType === 2 ? "v != null && v.length !== 0" : "v";
          lines.push(`if (${present}) { w.uint32(${tagOf(f.id, scalar.wireType)}); ${write("v")} }`);
        }
      } else {
        const j = this.messageIndex(f);
        const one = `{ w.uint32(${tagOf(f.id, 2)}); const s = w.beginDelimited(); e${j}(X, w); w.endDelimited(s); }`;
        if (f.repeated) lines.push(`if (v != null) for (let i = 0; i < v.length; i++) ${one.replace("X", "v[i]")}`);
        else lines.push(`if (v != null) ${one.replace("X", "v")}`);
      }
    }
    return `function e${i}(m, w) {\n  ${lines.join("\n  ")}\n}`;
  }
}

class CompiledCodec<T> implements MessageCodec<T> {
  readonly typeName: string;
  private readonly decodeFn: DecodeFn;
  private readonly encodeFn: EncodeFn;
  private hintBytes = 64;

  constructor(typeName: string, decodeFn: DecodeFn, encodeFn: EncodeFn) {
    this.typeName = typeName;
    this.decodeFn = decodeFn;
    this.encodeFn = encodeFn;
  }

  decode(buf: Buffer): T {
    return this.decodeFn(new ProtoReader(buf), buf.length) as T;
  }

  encode(msg: T): Buffer {
    const w = new ProtoWriter(this.hintBytes);
    this.encodeFn(msg, w);
    this.learn(w.pos);
    return w.finish();
  }

  encodeFramed(msg: T): Buffer {
    const w = new ProtoWriter(this.hintBytes + GRPC_PREFIX_BYTES, GRPC_PREFIX_BYTES);
    this.encodeFn(msg, w);
    const buf = w.finish();
    buf[0] = 0;
    buf.writeUInt32BE(buf.length - GRPC_PREFIX_BYTES, 1);
    this.learn(buf.length);
    return buf;
  }

  /** Sizes the next first buffer from the last message, so most encodes never grow. */
  private learn(bytes: number): void {
    if (bytes > this.hintBytes) this.hintBytes = Math.min(bytes + 16, ENCODE_HINT_BYTES_MAX);
  }
}

function collectTypes(ns: protobuf.NamespaceBase, out: protobuf.Type[]): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type) out.push(nested);
    if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) collectTypes(nested, out);
  }
}

function collectServices(ns: protobuf.NamespaceBase, out: protobuf.Service[]): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Service) out.push(nested);
    else if (nested instanceof protobuf.Namespace) collectServices(nested, out);
  }
}

function stripDot(name: string): string {
  return name.startsWith(".") ? name.slice(1) : name;
}

/** All message codecs and service descriptors of a set of .proto files. */
export class ProtoCodecs {
  private readonly codecs = new Map<string, MessageCodec<unknown>>();
  private readonly services = new Map<string, MethodDescriptor[]>();

  private constructor(root: protobuf.Root) {
    root.resolveAll();
    const types: protobuf.Type[] = [];
    collectTypes(root, types);
    const index = new Map(types.map((t, i) => [t, i] as const));
    const compiler = new TypeCompiler(index);
    const source = types.map((t, i) => compiler.decoder(t, i) + "\n" + compiler.encoder(t, i)).join("\n");
    const names = types.map((_, i) => `d${i}, e${i}`).join(", ");
    // Generated once at load from the parsed protos (see the file comment for why).
    const factory = new Function("EMPTY", "WireError", `${source}\nreturn [${names}];`) as (
      empty: Buffer,
      wireError: typeof WireError,
    ) => (DecodeFn | EncodeFn)[];
    const fns = factory(EMPTY_BYTES, WireError);
    types.forEach((t, i) => {
      const name = stripDot(t.fullName);
      this.codecs.set(name, new CompiledCodec(name, fns[2 * i] as DecodeFn, fns[2 * i + 1] as EncodeFn));
    });
    const services: protobuf.Service[] = [];
    collectServices(root, services);
    for (const svc of services) {
      const serviceName = stripDot(svc.fullName);
      this.services.set(
        serviceName,
        svc.methodsArray.map((m) => {
          m.resolve();
          return {
            path: `/${serviceName}/${m.name}`,
            service: serviceName,
            name: m.name,
            requestStream: m.requestStream === true,
            responseStream: m.responseStream === true,
            request: this.message(stripDot(m.resolvedRequestType!.fullName)),
            response: this.message(stripDot(m.resolvedResponseType!.fullName)),
          };
        }),
      );
    }
  }

  static load(options: ProtoLoadOptions): ProtoCodecs {
    const root = new protobuf.Root();
    const dir = options.protoDir.endsWith("/") ? options.protoDir : options.protoDir + "/";
    root.resolvePath = (_origin, target) => (target.startsWith("/") ? target : dir + target);
    root.loadSync([...options.files], { keepCase: options.keepCase ?? true });
    return new ProtoCodecs(root);
  }

  /** The codec of a message type by full name (throws if unknown). */
  message<T, Init = T>(typeName: string): MessageCodec<T, Init> {
    const codec = this.codecs.get(typeName);
    if (!codec) throw new Error(`unknown message type ${typeName}`);
    return codec as MessageCodec<T, Init>;
  }

  /** The methods of a service by full name (throws if unknown). */
  service(serviceName: string): readonly MethodDescriptor[] {
    const methods = this.services.get(serviceName);
    if (!methods) throw new Error(`unknown service ${serviceName}`);
    return methods;
  }

  serviceNames(): string[] {
    return [...this.services.keys()];
  }
}
