/**
 * The README's secure three-member set-up (TLS on both ports, client and peer certificates of one
 * CA, then auth on) run as written: the block is taken from README.md, its fixed ports swapped for
 * free ones (test/ports.ts), `npm run build` skipped (the suite runs on a built tree), and run with
 * bash in a scratch directory. What etcdctl prints must be what the README's comments say. With
 * E2E_TARGET=etcd the members are real etcd (`node dist/server.js` swapped for it): the commands
 * are etcd's own.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ETCD_BIN } from "../binaries.js";
import { reservePort } from "../ports.js";
import { ETCDCTL, ROOT, TARGET_ETCD } from "./harness.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-readme-secure-"));
let group: number | undefined;

afterAll(() => {
  // The script's members run in its process group (started detached): end that group only.
  if (group !== undefined) {
    try {
      process.kill(-group, "SIGKILL");
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The ```sh block after the README's pointer to this test. */
function readmeBlock(): string {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const at = readme.indexOf("test/e2e/readme_secure.test.ts` runs this block");
  if (at < 0) throw new Error("README.md no longer points at this test");
  const start = readme.indexOf("```sh\n", at);
  const end = readme.indexOf("\n```", start + 6);
  return readme.slice(start + 6, end + 1);
}

describe("README: a secure three-member set-up", () => {
  it("works as written: TLS on both ports, etcdctl with the client certificate, auth on", { timeout: 180_000 }, async () => {
    const fixed = [32379, 32380, 22379, 22380, 2379, 2380];
    const free = new Map<string, string>();
    for (const p of fixed) free.set(String(p), String(await reservePort()));
    let script = readmeBlock();
    expect(script).toContain("npm run build\n");
    script = script.replace("npm run build\n", ":\n").replace(/\b(32379|32380|22379|22380|2379|2380)\b/g, (p) => free.get(p)!);
    if (TARGET_ETCD) script = script.replaceAll("node dist/server.js", ETCD_BIN);
    for (const name of ["dist", "scripts"]) symlinkSync(join(ROOT, name), join(dir, name));
    const path = [dirname(ETCDCTL), dirname(process.execPath), process.env.PATH ?? ""].join(":");
    const child = spawn("bash", ["-c", `${script}\necho README-DONE`], { cwd: dir, detached: true, env: { ...process.env, PATH: path }, stdio: ["ignore", "pipe", "pipe"] });
    group = child.pid;
    let out = "";
    let err = "";
    child.stdout.on("data", (b: Buffer) => (out += b.toString()));
    child.stderr.on("data", (b: Buffer) => (err += b.toString()));
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        if (group !== undefined) process.kill(-group, "SIGKILL");
      }, 150_000);
      child.on("exit", (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    const log = (n: string) => {
      try {
        return readFileSync(join(dir, "secure", `${n}.log`), "utf8").slice(-2000);
      } catch {
        return "(no log)";
      }
    };
    const why = `exit ${code}\nstdout:\n${out}\nstderr:\n${err}\nn1:\n${log("n1")}`;
    expect(out, why).toContain("README-DONE");
    const lines = out.split("\n");
    // Each member healthy over TLS (etcdctl 3.4 prints health on stderr; the until loop may print unhealthy rounds first).
    for (const p of [free.get("2379"), free.get("22379"), free.get("32379")]) expect(out + err, why).toMatch(new RegExp(`https://127\\.0\\.0\\.1:${p} is healthy`));
    const after = lines.slice(lines.findIndex((l) => l === "OK"));
    expect(after.join("\n"), why).toBe(
      [
        "OK",
        "greeting",
        "hello",
        "User root created",
        "Role root created",
        "Role root is granted to user root",
        "User alice created",
        "Role app created",
        "Role app updated",
        "Role app is granted to user alice",
        "Authentication Enabled",
        "alice",
        "root",
        "OK",
        "README-DONE",
        "",
      ].join("\n"),
    );
    expect(err, why).toContain("Error: etcdserver: permission denied");
  });
});
