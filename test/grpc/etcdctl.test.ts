/**
 * The node:http2 server driven by real etcdctl (Go gRPC): toy KV, Watch, Lease,
 * Auth and Maintenance handlers prove that requests decode, responses parse,
 * metadata (the auth token) arrives, bidi streams open and statuses map to
 * etcdctl's error output.
 */

import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { KVHandlers, WatchHandlers } from "../../src/grpc/services.js";
import type { ServerWritable } from "../../src/grpc/handler.js";
import { GrpcServer } from "../../src/grpc/server.js";
import { GrpcError, Status } from "../../src/grpc/status.js";
import { eventually } from "./harness.js";
import { ETCDCTL_BIN } from "../binaries.js";

const ETCDCTL = ETCDCTL_BIN;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function etcdctl(port: number, args: string[], timeoutMs = 15_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      ETCDCTL,
      [`--endpoints=127.0.0.1:${port}`, "--command-timeout=5s", ...args],
      { env: { ...process.env, ETCDCTL_API: "3" }, timeout: timeoutMs },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const header = (revision: number) => ({ cluster_id: 0x1234n, member_id: 0x42n, revision, raft_term: 2 });

describe("etcdctl against the node:http2 server", () => {
  const server = new GrpcServer();
  const puts: { key: string; value: string; lease: number | bigint; token: string | undefined }[] = [];
  const watchRequests: string[] = [];
  let port = 0;
  let watchStreams = 0;

  beforeAll(async () => {
    const kv: Partial<KVHandlers> = {
      Range: (req, ctx) => {
        if (req.key.toString() === "missing") return { header: header(9), kvs: [], count: 0 };
        if (req.key.toString() === "secret" && ctx.metadata.get("token") !== "tok-root") {
          throw new GrpcError(Status.PERMISSION_DENIED, "etcdserver: permission denied");
        }
        return {
          header: header(9),
          kvs: [{ key: req.key, value: Buffer.from("bar"), create_revision: 4, mod_revision: 9, version: 2, lease: 0 }],
          count: 1,
        };
      },
      Put: (req, ctx) => {
        puts.push({ key: req.key.toString(), value: req.value.toString(), lease: req.lease, token: ctx.metadata.get("token") });
        return { header: header(10) };
      },
      DeleteRange: () => {
        throw new GrpcError(Status.INVALID_ARGUMENT, "etcdserver: key is not provided");
      },
    };
    server.addService("etcdserverpb.KV", kv);
    const watch: WatchHandlers = {
      Watch: (call, ctx) => {
        watchStreams++;
        call.onMessage((req) => {
          watchRequests.push(req.request_union ?? "none");
          if (req.request_union !== "create_request") return;
          call.write({ header: header(10), watch_id: 0, created: true });
          call.write({
            header: header(11),
            watch_id: 0,
            events: [{ type: 0, kv: { key: req.create_request!.key, value: Buffer.from("v1"), mod_revision: 11, create_revision: 11, version: 1 } }],
          });
        });
        ctx.signal.addEventListener("abort", () => watchStreams--);
      },
    };
    server.addService("etcdserverpb.Watch", watch);
    server.addService("etcdserverpb.Lease", {
      LeaseGrant: (req: { TTL: number; ID: number | bigint }) => ({ header: header(10), ID: 0x1d77f3d1d0a40a, TTL: req.TTL }),
    });
    server.addService("etcdserverpb.Auth", {
      Authenticate: (req: { name: string; password: string }) => {
        if (req.name !== "root" || req.password !== "pw") {
          throw new GrpcError(Status.INVALID_ARGUMENT, "etcdserver: authentication failed, invalid user ID or password");
        }
        return { header: header(10), token: "tok-root" };
      },
    });
    server.addService("etcdserverpb.Maintenance", {
      Status: () => ({ header: header(12), version: "3.5.0", dbSize: 20480, leader: 0x42n, raftIndex: 77, raftTerm: 2, raftAppliedIndex: 77, dbSizeInUse: 16384 }),
      Snapshot: async (_req: object, call: ServerWritable<object>) => {
        // etcd's snapshot stream ends with the sha256 of the database, which etcdctl checks.
        const blob = Buffer.alloc(64 * 1024, 1);
        const hash = createHash("sha256");
        for (let i = 0; i < 4; i++) hash.update(blob);
        const chunks = [blob, blob, blob, blob, hash.digest()];
        let remaining = 4 * blob.length + 32;
        for (const chunk of chunks) {
          remaining -= chunk.length;
          if (!call.write({ header: header(12), remaining_bytes: remaining, blob: chunk })) await call.drain();
        }
      },
    });
    ({ port } = await server.listen(0));
  });

  afterAll(async () => {
    await server.close(100);
  });

  it("get -w json parses the Range response", async () => {
    const run = await etcdctl(port, ["get", "foo", "-w", "json"]);
    expect(run.code).toBe(0);
    const out = JSON.parse(run.stdout);
    expect(out.header).toMatchObject({ cluster_id: 0x1234, member_id: 0x42, revision: 9, raft_term: 2 });
    expect(out.count).toBe(1);
    expect(Buffer.from(out.kvs[0].key, "base64").toString()).toBe("foo");
    expect(Buffer.from(out.kvs[0].value, "base64").toString()).toBe("bar");
    expect(out.kvs[0]).toMatchObject({ create_revision: 4, mod_revision: 9, version: 2 });
  });

  it("get prints key and value; an empty result prints nothing", async () => {
    expect((await etcdctl(port, ["get", "foo"])).stdout).toBe("foo\nbar\n");
    const missing = await etcdctl(port, ["get", "missing"]);
    expect(missing.code).toBe(0);
    expect(missing.stdout).toBe("");
  });

  it("put reaches the Put handler with key, value and lease", async () => {
    const run = await etcdctl(port, ["put", "k1", "hello world", "--lease=1a2b"]);
    expect(run.stdout).toBe("OK\n");
    expect(puts.at(-1)).toEqual({ key: "k1", value: "hello world", lease: 0x1a2b, token: undefined });
  });

  it("handler errors surface as etcdctl errors with the status message", async () => {
    const run = await etcdctl(port, ["del", "foo"]);
    expect(run.code).not.toBe(0);
    expect(run.stderr).toContain("etcdserver: key is not provided");
  });

  it("unregistered methods and services answer Unimplemented", async () => {
    const method = await etcdctl(port, ["compaction", "5"]);
    expect(method.stderr).toContain("code = Unimplemented desc = method Compact not implemented");
    const service = await etcdctl(port, ["member", "list"]);
    expect(service.stderr).toContain("code = Unimplemented desc = unknown service etcdserverpb.Cluster");
  });

  it("--user authenticates and the token arrives as metadata", async () => {
    const denied = await etcdctl(port, ["get", "secret"]);
    expect(denied.stderr).toContain("etcdserver: permission denied");
    const run = await etcdctl(port, ["--user=root:pw", "put", "k2", "v2"]);
    expect(run.stdout).toBe("OK\n");
    expect(puts.at(-1)?.token).toBe("tok-root");
    expect((await etcdctl(port, ["--user=root:pw", "get", "secret"])).stdout).toBe("secret\nbar\n");
  });

  it("lease grant decodes the int64 ID", async () => {
    const run = await etcdctl(port, ["lease", "grant", "30"]);
    expect(run.stdout).toBe("lease 001d77f3d1d0a40a granted with TTL(30s)\n");
  });

  it("watch opens a bidi stream, receives events, and its handler is aborted when etcdctl exits", async () => {
    const run = await etcdctl(port, ["watch", "foo"], 3_000);
    expect(watchRequests).toContain("create_request");
    expect(run.stdout).toBe("PUT\nfoo\nv1\n");
    await eventually(() => watchStreams === 0 && server.liveCalls === 0, "watch stream released");
  });

  it("endpoint status and snapshot save (server streaming)", async () => {
    const status = await etcdctl(port, ["endpoint", "status", "-w", "json"]);
    const parsed = JSON.parse(status.stdout);
    expect(parsed[0].Status).toMatchObject({ version: "3.5.0", dbSize: 20480, leader: 0x42, raftIndex: 77 });
    const dir = mkdtempSync(join(tmpdir(), "etcetera-grpc-"));
    try {
      const save = await etcdctl(port, ["snapshot", "save", join(dir, "snap.db")]);
      expect(save.stdout + save.stderr).toContain("Snapshot saved at");
      expect(statSync(join(dir, "snap.db")).size).toBeGreaterThanOrEqual(4 * 64 * 1024);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
