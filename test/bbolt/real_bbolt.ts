/**
 * Real bbolt as a reference: test/bbolt/bbolt_tool/main.go built against Debian's bbolt source
 * (GOPATH mode, no network), and its dump format reproduced from our reader for comparisons.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { BoltReader, type BoltBucket } from "../../src/bbolt/index.js";
import { DEBIAN_GOPATH, GO_BIN } from "../binaries.js";

export interface ToolResult {
  code: number;
  lines: string[];
}

function run(cmd: string, args: string[], env: Record<string, string>, timeoutMs: number): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(cmd, args, { env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 256 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === "number" ? err.code : 1;
      resolve({ code, stdout: stdout.toString(), stderr: stderr.toString() });
    });
  });
}

/** Builds the tool into `dir`; returns a runner. */
export async function buildBboltTool(dir: string): Promise<(args: string[]) => Promise<ToolResult>> {
  const bin = join(dir, "bbolt_tool");
  const src = join(import.meta.dirname, "bbolt_tool", "main.go");
  const env = { GO111MODULE: "off", GOPATH: DEBIAN_GOPATH, GOCACHE: join(dir, "gocache"), GOFLAGS: "" };
  const built = await run(GO_BIN, ["build", "-o", bin, src], env, 240_000);
  if (built.code !== 0) throw new Error(`go build of the bbolt tool failed:\n${built.stderr}`);
  return async (args) => {
    const r = await run(bin, args, {}, 120_000);
    return { code: r.code, lines: r.stdout.split("\n").filter((l) => l !== "") };
  };
}

/** The tool's dump lines, from our reader. */
export function dumpWithOurReader(r: BoltReader): string[] {
  const lines: string[] = [];
  const hex = (b: Uint8Array): string => Buffer.from(b).toString("hex");
  const walk = (b: BoltBucket, path: string[]): void => {
    for (const e of r.entries(b)) {
      if (e.isBucket) {
        const p = [...path, hex(e.key)];
        lines.push(`B ${p.join("/")}`);
        walk(r.openBucket(b, e), p);
      } else {
        lines.push(`K ${path.join("/")} ${hex(e.key)} ${e.value.length} ${createHash("sha256").update(e.value).digest("hex")}`);
      }
    }
  };
  walk(r.rootBucket(), []);
  return lines;
}
