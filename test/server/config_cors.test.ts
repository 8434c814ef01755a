/** --cors as etcd 3.4 validates it: "*", empty, or origin URLs with host:port. */
import { describe, expect, it } from "vitest";
import { ConfigError, parseConfig } from "../../src/server/config.js";

describe("--cors", () => {
  it("defaults to *, and takes origin URLs with host:port or *", () => {
    expect(parseConfig([], {}).cors).toBe("*");
    expect(parseConfig(["--cors=http://a.example:8080,https://b.example:443"], {}).cors).toBe("http://a.example:8080,https://b.example:443");
  });

  it("refuses an origin without a port as etcd does (exit 2, its words)", () => {
    let err: unknown;
    try {
      parseConfig(["--cors=http://a.example"], {});
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).exitCode).toBe(2);
    expect((err as ConfigError).message).toBe('invalid value "http://a.example" for flag -cors: URL address does not have the form "host:port": http://a.example');
  });
});
