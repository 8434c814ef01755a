/**
 * The CN of a verified client certificate is on the call context (verifiedClientCommonName), for
 * auth to use as the user name; a connection refused by the server's `check` is never served.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { verifiedClientCommonName } from "../../src/grpc/index.js";
import { GrpcServer } from "../../src/grpc/server.js";
import type { CallContext } from "../../src/grpc/handler.js";
import { makeCa, makeLeaf, type Ca, type Leaf } from "../e2e/tls_certs.js";
import { type EchoRequest, type EchoResponse, HandlerStats, echoHandlers, loadEchoCodecs } from "./harness.js";

const codecs = loadEchoCodecs();

describe("the verified client certificate's CN on the call context", () => {
  let dir: string;
  let ca: Ca;
  let alice: Leaf;
  let mallory: Leaf;
  let server: GrpcServer;
  let port: number;
  const refused: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "etcetera-cn-"));
    ca = makeCa(dir, "ca");
    const serverCert = makeLeaf(ca, "server");
    alice = makeLeaf(ca, "alice");
    mallory = makeLeaf(ca, "mallory");
    server = new GrpcServer({
      codecs,
      tls: {
        key: readFileSync(serverCert.key),
        cert: readFileSync(serverCert.cert),
        ca: readFileSync(ca.cert),
        requestCert: true,
        check: (socket) => (socket.getPeerCertificate().subject?.CN === "mallory" ? "mallory is not welcome" : undefined),
        onRefused: (_remote, reason) => refused.push(reason),
      },
    });
    server.addService("etceteratest.Echo", {
      ...echoHandlers(new HandlerStats()),
      Unary: (req: EchoRequest, ctx: CallContext): Promise<EchoResponse> =>
        Promise.resolve({ payload: Buffer.from(verifiedClientCommonName(ctx) ?? "<none>"), index: 0, metadata: "", zigzag: req.zigzag, numbers: req.numbers }),
    });
    ({ port } = await server.listen(0));
  });

  afterAll(async () => {
    await server.close(100);
    rmSync(dir, { recursive: true, force: true });
  });

  function callAs(leaf: Leaf): Promise<string> {
    const creds = grpc.credentials.createSsl(readFileSync(ca.cert), readFileSync(leaf.key), readFileSync(leaf.cert));
    const client = new (grpc.makeGenericClientConstructor({}, "x"))(`127.0.0.1:${port}`, creds);
    return new Promise<string>((resolve, reject) => {
      client.makeUnaryRequest(
        "/etceteratest.Echo/Unary",
        (v: Buffer) => v,
        (b: Buffer) => b,
        codecs.message("etceteratest.EchoRequest").encode({ payload: Buffer.from("x") }),
        { deadline: Date.now() + 5000 },
        (err, value) => {
          client.close();
          if (err) reject(err);
          else resolve(codecs.message<{ payload: Buffer }>("etceteratest.EchoResponse").decode(value!).payload.toString());
        },
      );
    });
  }

  it("a call over a connection with alice's certificate sees CN alice", async () => {
    expect(await callAs(alice)).toBe("alice");
  });

  it("a connection the check refuses is closed before any call, with the reason reported", async () => {
    await expect(callAs(mallory)).rejects.toThrow();
    expect(refused).toContain("mallory is not welcome");
  });
});
