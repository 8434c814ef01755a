/** Which HTTP/2 engine serves the client port (src/grpc/server.ts): ours by default, node:http2 on request. */
import { describe, expect, it } from "vitest";
import { GrpcServer, http2EngineFromEnv } from "../../src/grpc/server.js";

describe("ETCETERA_HTTP2", () => {
  it("defaults to our own engine; 'node' selects node:http2; anything else is refused by name", () => {
    expect(http2EngineFromEnv({})).toBe("own");
    expect(http2EngineFromEnv({ ETCETERA_HTTP2: "" })).toBe("own");
    expect(http2EngineFromEnv({ ETCETERA_HTTP2: "own" })).toBe("own");
    expect(http2EngineFromEnv({ ETCETERA_HTTP2: "node" })).toBe("node");
    expect(() => http2EngineFromEnv({ ETCETERA_HTTP2: "Node" })).toThrow("ETCETERA_HTTP2=Node: expected one of own, node");
  });

  it("the server option wins over the environment", () => {
    expect(new GrpcServer({ http2Engine: "node" }).http2Engine).toBe("node");
    expect(new GrpcServer({ http2Engine: "own" }).http2Engine).toBe("own");
  });
});
