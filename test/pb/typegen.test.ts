import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ETCD_API_FILES, PROTO_DIR } from "../../src/pb/protos.js";
import { generateTypes } from "../../src/pb/typegen.js";

describe("etcd-types.ts", () => {
  it("is up to date with the protos (regenerate: npx tsx src/pb/typegen.ts > src/pb/etcd-types.ts)", () => {
    const committed = readFileSync(fileURLToPath(new URL("../../src/pb/etcd-types.ts", import.meta.url)), "utf8");
    const generated = generateTypes(PROTO_DIR, ETCD_API_FILES, "npx tsx src/pb/typegen.ts > src/pb/etcd-types.ts");
    expect(generated).toBe(committed);
  });
});
