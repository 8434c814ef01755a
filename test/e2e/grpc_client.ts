/**
 * A plain @grpc/grpc-js client of etcd's API for e2e tests: the protos in proto/, loaded with
 * @grpc/proto-loader (snake_case fields, int64 as strings), one promise-returning call per method.
 */
import * as grpc from "@grpc/grpc-js";
import * as loader from "@grpc/proto-loader";
import { join } from "node:path";
import { ROOT } from "./harness.js";

const PROTO_DIR = join(ROOT, "proto");

let pkg: grpc.GrpcObject | undefined;
function loadPackage(): grpc.GrpcObject {
  pkg ??= grpc.loadPackageDefinition(
    loader.loadSync(["etcdserverpb/rpc.proto", "v3lockpb/v3lock.proto", "v3electionpb/v3election.proto"], {
      includeDirs: [PROTO_DIR],
      keepCase: true,
      longs: String,
      enums: String,
      defaults: true,
      oneofs: true,
    }),
  );
  return pkg;
}

type Ctor = new (address: string, creds: grpc.ChannelCredentials, options?: object) => grpc.Client;

/** The loaded protos as package → service → client constructor (etcdserverpb, v3lockpb, v3electionpb). */
export function etcdServices(): Record<string, Record<string, Ctor>> {
  return loadPackage() as unknown as Record<string, Record<string, Ctor>>;
}

export function serviceCtor(path: string): Ctor {
  let o: unknown = loadPackage();
  for (const part of path.split(".")) o = (o as Record<string, unknown>)[part];
  return o as Ctor;
}

export interface CallError extends Error {
  code: number;
  details: string;
}

/** A unary call as a promise. */
export function unary<T = Record<string, unknown>>(
  client: grpc.Client,
  method: string,
  req: object,
  opts: { metadata?: Record<string, string>; deadlineMs?: number } = {},
): Promise<T> {
  const md = new grpc.Metadata();
  for (const [k, v] of Object.entries(opts.metadata ?? {})) md.set(k, v);
  return new Promise((resolve, reject) => {
    const fn = (client as unknown as Record<string, (...a: unknown[]) => void>)[method]!.bind(client);
    fn(req, md, { deadline: Date.now() + (opts.deadlineMs ?? 10_000) }, (err: grpc.ServiceError | null, res: T) => {
      if (err) reject(err);
      else resolve(res);
    });
  });
}

export function clients(endpoint: string) {
  const creds = grpc.credentials.createInsecure();
  const opts = { "grpc.max_send_message_length": 64 * 1024 * 1024, "grpc.max_receive_message_length": 64 * 1024 * 1024 };
  return {
    kv: new (serviceCtor("etcdserverpb.KV"))(endpoint, creds, opts),
    lease: new (serviceCtor("etcdserverpb.Lease"))(endpoint, creds, opts),
    maintenance: new (serviceCtor("etcdserverpb.Maintenance"))(endpoint, creds, opts),
    cluster: new (serviceCtor("etcdserverpb.Cluster"))(endpoint, creds, opts),
    watch: new (serviceCtor("etcdserverpb.Watch"))(endpoint, creds, opts),
    auth: new (serviceCtor("etcdserverpb.Auth"))(endpoint, creds, opts),
    lock: new (serviceCtor("v3lockpb.Lock"))(endpoint, creds, opts),
    close(): void {
      for (const c of [this.kv, this.lease, this.maintenance, this.cluster, this.watch, this.auth, this.lock]) c.close();
    },
  };
}

/** Expects `p` to fail with gRPC status `code` and exactly `message`. */
export async function expectStatus(p: Promise<unknown>, code: number, message: string): Promise<void> {
  try {
    await p;
  } catch (e) {
    const err = e as CallError;
    if (err.code !== code || err.details !== message) {
      throw new Error(`expected status ${code} "${message}", got ${err.code} "${err.details}"`);
    }
    return;
  }
  throw new Error(`expected status ${code} "${message}", but the call succeeded`);
}
