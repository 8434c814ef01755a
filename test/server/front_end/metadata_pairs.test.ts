import { describe, expect, it } from "vitest";
import { HeaderMetadata } from "../../../src/grpc/metadata.js";
import { headersFromPairs, headersToPairs, metadataToPairs } from "../../../src/server/front_end/pipe_call.js";

// A call's headers as a front end's HTTP/2 layer hands them over (grpc-go's set, plus metadata).
const CALL_HEADERS = {
  ":method": "POST",
  ":path": "/etcdserverpb.KV/Put",
  ":authority": "127.0.0.1:2379",
  "content-type": "application/grpc",
  "user-agent": "grpc-go/1.26.0",
  te: "trailers",
  "grpc-timeout": "4999m",
  "grpc-accept-encoding": "gzip",
  token: "abc.def",
  hasleader: "true",
  "x-list": "a, b",
  "x-many": ["one", "two"],
};

describe("a call's metadata on the pipe", () => {
  it("carries only the application's metadata, values as they came", () => {
    const pairs = metadataToPairs(CALL_HEADERS);
    expect(pairs).toEqual(["token", "abc.def", "hasleader", "true", "x-list", "a, b", "x-many", "one", "x-many", "two"]);
  });

  it("reads in the core as the front end's own metadata reads", () => {
    const front = new HeaderMetadata(CALL_HEADERS);
    const core = new HeaderMetadata(headersFromPairs(metadataToPairs(CALL_HEADERS)));
    for (const key of ["token", "hasleader", "x-list", "x-many", "authorization"]) {
      expect(core.get(key)).toEqual(front.get(key));
      expect(core.getAll(key)).toEqual(front.getAll(key));
    }
    expect(core.toRecord()).toEqual(front.toRecord());
  });

  it("keeps every non-pseudo header for a plain HTTP request", () => {
    expect(headersToPairs(CALL_HEADERS)).toContain("content-type");
    expect(headersToPairs(CALL_HEADERS)).not.toContain(":path");
  });
});
