/**
 * Drives lazyfs (lazyfs/lazyfs.c): builds it once per source version, mounts it over a "disk"
 * directory, cuts the power, and remounts on what is left. The durability model is documented at
 * the top of lazyfs.c.
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

const SOURCE = resolve(import.meta.dirname, "lazyfs/lazyfs.c");

/**
 * Compiles lazyfs into a temp dir named by the source's hash, once: every test file and script of a
 * run (and later runs of the same source) share the binary. Needs gcc and libfuse3-dev (.ci/run).
 */
export function buildLazyFs(): string {
  const src = readFileSync(SOURCE);
  const dir = join(tmpdir(), `etcetera-lazyfs-${createHash("sha256").update(src).digest("hex").slice(0, 16)}`);
  const bin = join(dir, "lazyfs");
  if (existsSync(bin)) return bin;
  mkdirSync(dir, { recursive: true });
  const flags = execFileSync("pkg-config", ["--cflags", "--libs", "fuse3"]).toString().trim().split(/\s+/);
  // Built under a private name and renamed: two test files building at once never see half a binary.
  const partial = `${bin}.${process.pid}`;
  execFileSync("gcc", ["-O2", "-Wall", "-Wextra", "-Werror", "-Wno-format-truncation", "-o", partial, SOURCE, ...flags], {
    stdio: ["ignore", "inherit", "inherit"],
  });
  renameSync(partial, bin);
  return bin;
}

/** Whether `path` is a mount point now (by /proc/self/mounts). */
export function isMounted(path: string): boolean {
  const target = resolve(path);
  return readFileSync("/proc/self/mounts", "utf8")
    .split("\n")
    .some((line) => line.split(" ")[1] === target);
}

export interface LazyFsOptions {
  /** The durable directory: what is left after a power cut. */
  disk: string;
  /** Scratch space for the volatile tree and the durable inode store (same file system as disk). */
  work: string;
  mountpoint: string;
  /** Where the power cut writes what it dropped. */
  log?: string;
  /** Seeds the torn write. */
  seed?: number;
  /** Tear the newest unsynced write at the power cut. */
  tear?: boolean;
  /** At the power cut, each unsynced 4 KiB page had reached the disk with this probability (%, seeded). */
  writebackPercent?: number;
}

const live = new Set<LazyFs>();

/** One mounted lazyfs process. */
export class LazyFs {
  private exited: Promise<number | null>;
  private output = "";

  private constructor(
    readonly opts: LazyFsOptions,
    private readonly proc: ChildProcess,
  ) {
    this.exited = new Promise((res) => proc.on("exit", (code) => res(code)));
    const append = (b: Buffer) => (this.output += b.toString());
    proc.stdout?.on("data", append);
    proc.stderr?.on("data", append);
  }

  /** Mounts lazyfs over `opts.disk` at `opts.mountpoint` and waits until the mount is there. */
  static async mount(opts: LazyFsOptions): Promise<LazyFs> {
    const bin = buildLazyFs();
    for (const d of [opts.disk, opts.work, opts.mountpoint]) mkdirSync(d, { recursive: true });
    if (isMounted(opts.mountpoint)) throw new Error(`${opts.mountpoint} is already a mount point`);
    const args = ["--disk", opts.disk, "--work", opts.work, "--die-with-parent"];
    if (opts.log !== undefined) args.push("--log", opts.log);
    if (opts.seed !== undefined) args.push("--seed", String(opts.seed));
    if (opts.tear === true) args.push("--tear");
    if (opts.writebackPercent !== undefined) args.push("--writeback", String(opts.writebackPercent));
    const proc = spawn(bin, [...args, opts.mountpoint], { stdio: ["ignore", "pipe", "pipe"] });
    const fs = new LazyFs(opts, proc);
    live.add(fs);
    const deadline = Date.now() + 10_000;
    let gone = false;
    void fs.exited.then(() => (gone = true));
    while (!isMounted(opts.mountpoint)) {
      if (gone || Date.now() > deadline) {
        await fs.unmount();
        throw new Error(`lazyfs did not mount ${opts.mountpoint}:\n${fs.output}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    return fs;
  }

  /**
   * Loses power: lazyfs drops everything not durable (tearing the newest unsynced write if asked),
   * writes its log and unmounts. Processes using the mount must be dead already (a power cut kills
   * them too; killing first means no request is half-served). Returns the log.
   */
  async powerCut(): Promise<string> {
    this.proc.kill("SIGUSR1");
    const code = await this.exited;
    live.delete(this);
    if (code !== 0) throw new Error(`lazyfs exited ${code} at the power cut:\n${this.output}`);
    if (isMounted(this.opts.mountpoint)) throw new Error(`${this.opts.mountpoint} still mounted after the power cut`);
    return this.opts.log !== undefined && existsSync(this.opts.log) ? readFileSync(this.opts.log, "utf8") : "";
  }

  /** Stops lazyfs whatever its state (same drop as a power cut); never leaves the mount behind. */
  async unmount(): Promise<void> {
    live.delete(this);
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill("SIGTERM");
      const timeout = new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 5_000));
      if ((await Promise.race([this.exited, timeout])) === "timeout") this.proc.kill("SIGKILL");
      await this.exited;
    }
    // A lazyfs that died (or was killed) leaves a dead mount ("transport endpoint is not connected").
    if (isMounted(this.opts.mountpoint)) execFileSync("fusermount3", ["-u", "-z", this.opts.mountpoint]);
  }

  /** What lazyfs printed (for a failing test's message). */
  get log(): string {
    return this.output;
  }
}

/** Unmounts every lazyfs this process mounted (afterAll: no mount survives a failed test). */
export async function unmountAll(): Promise<void> {
  for (const fs of [...live]) await fs.unmount();
}

/** A disk + work + mountpoint triple in a fresh temp dir. */
export function scratch(prefix: string): { root: string; disk: string; work: string; mnt: string; log: string; remove(): void } {
  const root = join(tmpdir(), `${prefix}-${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`);
  const dirs = { root, disk: join(root, "disk"), work: join(root, "work"), mnt: join(root, "mnt"), log: join(root, "cut.log") };
  for (const d of [dirs.disk, dirs.work, dirs.mnt]) mkdirSync(d, { recursive: true });
  return {
    ...dirs,
    remove() {
      if (isMounted(dirs.mnt)) throw new Error(`${dirs.mnt} still mounted`);
      rmSync(root, { recursive: true, force: true });
    },
  };
}
