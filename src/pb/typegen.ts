/**
 * Generates TypeScript declarations of the messages the compiled codecs
 * produce and accept (see codec.ts for the shape):
 *   - `Foo` is a decoded message: every proto3 field present (bytes as Buffer,
 *     64-bit integers and enums as numbers), message fields and unset oneof
 *     members `undefined`, and the oneof's name holding the set member's name;
 *   - `FooInit` is what an encoder accepts: every field optional, bytes as
 *     Uint8Array or string (UTF-8).
 * Enums become `const` objects of their numbers. Each service becomes a table of
 * its methods (`KVMethods`), which src/grpc/services.ts turns into handler
 * signatures: this file stays a leaf that imports nothing of ours.
 *
 *   npx tsx src/pb/typegen.ts > src/pb/etcd-types.ts
 *   npx tsx src/pb/typegen.ts --member > src/pb/member-types.ts
 *
 * etcd-types.ts names fields as the protos do (the default codecs, etcd's JSON);
 * member-types.ts is the same messages, plus raft_internal.proto, under the
 * camelCase names the member's codecs (loadMemberCodecs) decode to.
 */

import protobuf from "protobufjs";
import { fileURLToPath } from "node:url";
import { isExactInt64Field, isId64Field } from "./id_fields.js";
import { ETCD_API_FILES, MEMBER_FILES, PROTO_DIR } from "./protos.js";

const NUMBER_TYPES = new Set([
  "double", "float", "int32", "uint32", "sint32", "fixed32", "sfixed32",
  "int64", "uint64", "sint64", "fixed64", "sfixed64",
]);

/** TypeScript name of a message or enum: nested names joined with "_" (RangeRequest_SortOrder). */
function tsName(t: protobuf.ReflectionObject): string {
  const parts: string[] = [];
  for (let o: protobuf.ReflectionObject | null = t; o && !(o.parent === null); o = o.parent) {
    if (o instanceof protobuf.Type || o instanceof protobuf.Enum) parts.unshift(o.name);
  }
  return parts.join("_");
}

function scalarType(f: protobuf.Field, init: boolean, o: TypegenOptions): string {
  if (f.resolvedType instanceof protobuf.Enum) return "number";
  if (f.resolvedType instanceof protobuf.Type) return tsName(f.resolvedType) + (init ? "Init" : "");
  if (NUMBER_TYPES.has(f.type)) {
    const parent = f.parent instanceof protobuf.Type ? f.parent.fullName.slice(1) : "";
    if (isId64Field(parent, f.id)) return "bigint";
    // Lease and watch ids: exact, a number while safe and a bigint beyond (ProtoReader.int64Exact).
    if (isExactInt64Field(parent, f.id)) return "number | bigint";
    return "number";
  }
  if (f.type === "bool") return "boolean";
  if (f.type === "string") return "string";
  if (f.type === "bytes") return init ? o.initBytes : "Buffer";
  throw new Error(`${f.fullName}: unsupported type ${f.type}`);
}

function messageDecl(t: protobuf.Type, o: TypegenOptions): string {
  const name = tsName(t);
  const decoded: string[] = [];
  const init: string[] = [];
  const fields = [...t.fieldsArray].sort((a, b) => a.id - b.id);
  for (const f of fields) {
    f.resolve();
    const base = scalarType(f, false, o);
    const baseInit = scalarType(f, true, o);
    const isMessage = f.resolvedType instanceof protobuf.Type;
    if (f.repeated) {
      decoded.push(`  ${f.name}: ${wrapArray(base)};`);
      init.push(`  ${f.name}?: ${wrapArray(baseInit)};`);
    } else if (isMessage || f.partOf) {
      decoded.push(`  ${f.name}: ${base} | undefined;`);
      init.push(`  ${f.name}?: ${baseInit} | null;`);
    } else {
      decoded.push(`  ${f.name}: ${base};`);
      init.push(`  ${f.name}?: ${baseInit};`);
    }
  }
  for (const oneof of t.oneofsArray) {
    const names = oneof.fieldsArray.map((f) => JSON.stringify(f.name)).join(" | ");
    decoded.push(`  /** Which member of oneof ${oneof.name} is set. */\n  ${oneof.name}: ${names} | undefined;`);
  }
  const fullName = t.fullName.slice(1);
  return (
    `/** ${fullName}, as decoded. */\nexport interface ${name} {\n${decoded.join("\n")}\n}\n\n` +
    `/** ${fullName}, as given to the encoder. */\nexport interface ${name}Init {\n${init.join("\n")}\n}\n`
  );
}

function wrapArray(t: string): string {
  return t.includes("|") ? `(${t})[]` : `${t}[]`;
}

function enumDecl(e: protobuf.Enum): string {
  const name = tsName(e);
  const entries = Object.entries(e.values).map(([k, v]) => `  ${k}: ${v},`);
  return `export const ${name} = {\n${entries.join("\n")}\n} as const;\nexport type ${name} = (typeof ${name})[keyof typeof ${name}];\n`;
}

function serviceDecl(svc: protobuf.Service): string {
  const lines = svc.methodsArray.map((m) => {
    m.resolve();
    const req = tsName(m.resolvedRequestType!);
    const res = tsName(m.resolvedResponseType!) + "Init";
    return `  ${m.name}: { request: ${req}; response: ${res}; requestStream: ${m.requestStream === true}; responseStream: ${m.responseStream === true} };`;
  });
  return `/** Methods of ${svc.fullName.slice(1)}: the decoded request, the response as given to the encoder, which sides stream. */
export interface ${svc.name}Methods {
${lines.join("\n")}
}
`;
}

function servicesDecl(services: protobuf.Service[]): string {
  const lines = services.map((svc) => `  ${JSON.stringify(svc.fullName.slice(1))}: ${svc.name}Methods;`);
  return `/** Every service of these protos, by full name. */
export interface Services {
${lines.join("\n")}
}
`;
}

function collect(ns: protobuf.NamespaceBase, types: protobuf.Type[], enums: protobuf.Enum[], services: protobuf.Service[]): void {
  for (const nested of ns.nestedArray) {
    if (nested instanceof protobuf.Type) types.push(nested);
    if (nested instanceof protobuf.Enum) enums.push(nested);
    if (nested instanceof protobuf.Service) services.push(nested);
    if (nested instanceof protobuf.Namespace || nested instanceof protobuf.Type) collect(nested, types, enums, services);
  }
}

/** How the declarations name fields and type bytes; the default matches ProtoCodecs.load's. */
export interface TypegenOptions {
  /** Property names as written in the proto (true) or protobufjs's camelCase (false), as ProtoLoadOptions.keepCase. */
  keepCase: boolean;
  /** The type of a bytes field in `FooInit`. */
  initBytes: "Uint8Array | string" | "Uint8Array";
}

const DEFAULT_OPTIONS: TypegenOptions = { keepCase: true, initBytes: "Uint8Array | string" };

/**
 * The member's flavour (member-types.ts): camelCase names, as its codecs decode, and bytes
 * only as Uint8Array in `FooInit`, since the stores take those types as requests whose absent
 * fields mean proto3 defaults and compare keys as bytes.
 */
export const MEMBER_TYPEGEN: TypegenOptions = { keepCase: false, initBytes: "Uint8Array" };

/** The declarations file for a set of protos. */
export function generateTypes(protoDir: string, files: readonly string[], command: string, options: TypegenOptions = DEFAULT_OPTIONS): string {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => protoDir + target;
  root.loadSync([...files], { keepCase: options.keepCase });
  root.resolveAll();
  const types: protobuf.Type[] = [];
  const enums: protobuf.Enum[] = [];
  const services: protobuf.Service[] = [];
  collect(root, types, enums, services);
  const seen = new Set<string>();
  for (const t of [...types, ...enums]) {
    const name = tsName(t);
    if (seen.has(name)) throw new Error(`two proto types map to the TypeScript name ${name}`);
    seen.add(name);
  }
  return [
    `// Generated by \`${command}\` from ${files.join(", ")}. Do not edit.`,
    "/* eslint-disable */",
    "",
    ...enums.map(enumDecl),
    ...types.map((t) => messageDecl(t, options)),
    ...services.map(serviceDecl),
    servicesDecl(services),
  ].join("\n");
}

/** The regenerating commands, as the files' first lines and test/pb/typegen.test.ts say them. */
export const ETCD_TYPES_COMMAND = "npx tsx src/pb/typegen.ts > src/pb/etcd-types.ts";
export const MEMBER_TYPES_COMMAND = "npx tsx src/pb/typegen.ts --member > src/pb/member-types.ts";

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  process.stdout.write(
    process.argv.includes("--member")
      ? generateTypes(PROTO_DIR, MEMBER_FILES, MEMBER_TYPES_COMMAND, MEMBER_TYPEGEN)
      : generateTypes(PROTO_DIR, ETCD_API_FILES, ETCD_TYPES_COMMAND),
  );
}
