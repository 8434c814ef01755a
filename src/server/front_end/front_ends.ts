/**
 * The core's front ends (`--experimental-front-ends=N`, docs/multicore.md): the member process
 * becomes a node:cluster primary and forks N processes of the same binary that own the client
 * connections. SCHED_NONE hands each front end the listening socket itself, so the kernel spreads
 * the accepts and the core's thread never touches a client connection. Each front end gets a
 * private pipe (fd FRONT_END_PIPE_FD) for its calls; one that dies is forked again, and stopping
 * the member stops them all.
 */
import cluster, { type Worker } from "node:cluster";
import type { Socket } from "node:net";
import type { CallObserver, RegisteredMethod } from "../../grpc/call.js";
import type { HttpHandler } from "../../grpc/http.js";
import type { GrpcError } from "../../grpc/status.js";
import type { Logger } from "../logger.js";
import { FRONT_END_ENV, FRONT_END_FILE_ARGV_ENV, FRONT_END_PIPE_FD } from "./front_end.js";
import { FrontEndLink } from "./front_end_link.js";

export interface FrontEndsOptions {
  readonly count: number;
  readonly logger: Logger;
  /** The core's registered methods (a GrpcServer that never listens). */
  method(path: string): RegisteredMethod | GrpcError;
  readonly http: HttpHandler;
  readonly observer: CallObserver | undefined;
  readonly maxSendMessageBytes: number;
  /** The flags the core's config file stood for (null: the command line and environment, which a front end parses again). */
  readonly fileArgv: readonly string[] | null;
}

/** How long a front end whose pipe reset may take to exit 0 (a stop on its own signal) before the reset counts as a failure. */
const PIPE_CLOSED_EXIT_WAIT_MS = 2_000;
/** A front end that exits is forked again after this long at first (a crash loop does not spin the core)... */
const REFORK_DELAY_MS = 100;
/**
 * ...and after twice as long for each start in a row that failed (it exited before it listened,
 * or within REFORK_STABLE_MS of listening), up to this: a front end that cannot start (a client
 * key file replaced by an unreadable one) is tried again every 10 s, not every 100 ms forever.
 */
const REFORK_DELAY_MAX_MS = 10_000;
/** A front end that served this long has started well: the next exit is forked again after REFORK_DELAY_MS. */
const REFORK_STABLE_MS = 10_000;
/** How long stop() waits for a front end to exit on its own before killing it. */
const STOP_WAIT_MS = 5000;

interface Slot {
  worker: Worker;
  link: FrontEndLink;
  listening: boolean;
  /** When it listened (performance.now() ms). */
  listeningSinceMs: number;
}

/** How long to wait before forking a front end again after `failures` failed starts in a row. */
export function reforkDelayMs(failures: number): number {
  return Math.min(REFORK_DELAY_MS * 2 ** Math.min(failures, 20), REFORK_DELAY_MAX_MS);
}

export class FrontEnds {
  private readonly options: FrontEndsOptions;
  private readonly slots: (Slot | undefined)[];
  /** Failed starts in a row, per front end (reforkDelayMs). */
  private readonly failedStarts: number[];
  private stopping = false;

  private constructor(options: FrontEndsOptions) {
    this.options = options;
    this.slots = new Array<Slot | undefined>(options.count).fill(undefined);
    this.failedStarts = new Array<number>(options.count).fill(0);
  }

  /** Forks the front ends; resolves once every one listens on every client URL. */
  static async start(options: FrontEndsOptions): Promise<FrontEnds> {
    // Before the first fork: SCHED_NONE shares the listening socket instead of accepting in the primary.
    cluster.schedulingPolicy = cluster.SCHED_NONE;
    cluster.setupPrimary({
      exec: process.argv[1],
      args: process.argv.slice(2),
      execArgv: process.execArgv,
      // fd 3 is the front end's pipe (FRONT_END_PIPE_FD); logs go to the member's own stdout and stderr.
      stdio: ["ignore", "inherit", "inherit", "pipe", "ipc"],
    });
    const frontEnds = new FrontEnds(options);
    await Promise.all(Array.from({ length: options.count }, (_, i) => frontEnds.fork(i)));
    return frontEnds;
  }

  /** The front ends' process ids (tests, benchmarks). */
  get pids(): number[] {
    return this.slots.flatMap((s) => (s?.worker.process.pid === undefined ? [] : [s.worker.process.pid]));
  }

  /** Stops every front end: each closes its listeners and lets its calls finish; one that lingers is killed. */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(
      this.slots.map(async (slot) => {
        if (slot === undefined || slot.worker.isDead()) return;
        const exited = new Promise<void>((resolve) => slot.worker.once("exit", () => resolve()));
        slot.link.close();
        const timer = setTimeout(() => slot.worker.process.kill("SIGKILL"), STOP_WAIT_MS);
        await exited;
        clearTimeout(timer);
      }),
    );
  }

  /**
   * A front end's pipe closed. One signalled together with the core (systemd's stop signals the
   * whole cgroup) stops on its own and may reset the pipe as it exits: an exit 0 soon after is a
   * stop, not a failure. Any other error is one, and the front end is killed.
   */
  private pipeClosed(index: number, worker: Worker, error: Error | undefined): void {
    const kill = (): void => {
      if (!worker.isDead()) worker.process.kill("SIGKILL");
    };
    if (error === undefined || this.stopping) return kill();
    const failed = (): void => {
      this.options.logger.error({ frontEnd: index, err: String(error) }, "front end pipe failed; stopping that front end");
      kill();
    };
    if (worker.isDead()) return worker.process.exitCode === 0 ? undefined : failed();
    let settled = false;
    const settle = (stopped: boolean): void => {
      if (settled) return;
      settled = true;
      if (!stopped) failed();
    };
    const timer = setTimeout(() => settle(false), PIPE_CLOSED_EXIT_WAIT_MS);
    worker.once("exit", (code: number | null) => {
      clearTimeout(timer);
      settle(code === 0);
    });
  }

  /** Forks front end `index`; resolves once it listens (rejects if it exits first). */
  private fork(index: number): Promise<void> {
    const { logger } = this.options;
    // A front end forked again after the config file was edited must serve what the core serves: it gets the file's flags as read.
    const fileArgv = this.options.fileArgv === null ? {} : { [FRONT_END_FILE_ARGV_ENV]: JSON.stringify(this.options.fileArgv) };
    const worker = cluster.fork({ [FRONT_END_ENV]: String(index), ...fileArgv });
    const socket = worker.process.stdio?.[FRONT_END_PIPE_FD] as Socket | undefined;
    if (socket === undefined || socket === null) throw new Error(`front end ${index}: no pipe at fd ${FRONT_END_PIPE_FD}`);
    return new Promise<void>((resolve, reject) => {
      const link = new FrontEndLink(socket, {
        method: (path) => this.options.method(path),
        http: this.options.http,
        observer: this.options.observer,
        maxSendMessageBytes: this.options.maxSendMessageBytes,
        onListening: () => {
          slot.listening = true;
          slot.listeningSinceMs = performance.now();
          logger.info({ frontEnd: index, pid: worker.process.pid }, "front end serving the client URLs");
          resolve();
        },
        onClosed: (error) => this.pipeClosed(index, worker, error),
      });
      const slot: Slot = { worker, link, listening: false, listeningSinceMs: 0 };
      this.slots[index] = slot;
      worker.once("exit", (code: number | null, signal: string | null) => {
        if (!slot.listening) reject(new Error(`front end ${index} exited (code ${code}, signal ${signal}) before it listened`));
        if (this.stopping || this.slots[index] !== slot) return;
        const startedWell = slot.listening && performance.now() - slot.listeningSinceMs >= REFORK_STABLE_MS;
        this.failedStarts[index] = startedWell ? 0 : this.failedStarts[index]! + 1;
        const delayMs = reforkDelayMs(startedWell ? 0 : this.failedStarts[index]! - 1);
        // Exit 0 is a front end that stopped on a signal of its own (systemd signals the whole cgroup).
        const level = code === 0 ? "info" : "warn";
        const fields = { frontEnd: index, pid: worker.process.pid, code, signal, failedStartsInARow: this.failedStarts[index], reforkInMs: delayMs };
        logger[level](fields, slot.listening ? "front end exited; forking it again" : "front end exited before it listened; forking it again");
        setTimeout(() => {
          if (this.stopping) return;
          this.fork(index).catch((err: unknown) => logger.error({ frontEnd: index, err: String(err) }, "front end did not start again"));
        }, delayMs);
      });
    });
  }
}
