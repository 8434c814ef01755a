/**
 * One end of the pipe between the core and a front end: frames out, batched so that all frames of
 * one event-loop turn leave in one write (no syscall per request), and frames in, split by
 * FrameReader. The pipe's own backpressure is visible (`backedUp`, `whenWritable`) so that the
 * side producing responses pauses instead of buffering without bound.
 */
import type { Socket } from "node:net";
import { type Frame, frameBytes, type FrameKind, FrameReader, type FrameValues, writeFrame } from "./frame.js";

export interface FramePipeEvents {
  frame(frame: Frame): void;
  /** The pipe closed (the other process exited or closed it), or a frame was malformed. */
  closed(error: Error | undefined): void;
}

/** A turn's batch past this many bytes makes `backedUp` true until it is written. */
export const BATCH_BYTES_HIGH = 256 * 1024;
/** The output buffer a pipe starts with, and the largest it keeps after a flush. */
const OUT_BYTES_INITIAL = 64 * 1024;
const OUT_BYTES_KEPT_MAX = 1024 * 1024;

export class FramePipe {
  private readonly socket: Socket;
  private readonly events: FramePipeEvents;
  private readonly reader = new FrameReader();
  /**
   * The turn's frames, written straight into one buffer (no buffer per frame, no concatenation:
   * a call's reply was three allocations and two copies on the core's main thread). Reused by
   * the next turn when the socket took the write at once; undefined when it still holds it.
   */
  private out: Buffer | undefined;
  private batchBytes = 0;
  private flushScheduled = false;
  private waiters: (() => void)[] = [];
  private isClosed = false;
  /** The socket holds more than its high-water mark (until its 'drain'). */
  private socketBackedUp = false;

  constructor(socket: Socket, events: FramePipeEvents) {
    this.socket = socket;
    this.events = events;
    socket.on("data", (chunk: Buffer) => {
      if (this.isClosed) return;
      try {
        this.reader.push(chunk, events.frame);
      } catch (err) {
        this.close(err as Error);
      }
    });
    socket.on("drain", () => {
      this.socketBackedUp = false;
      if (!this.backedUp) this.releaseWaiters();
    });
    socket.on("error", (err: Error) => this.close(err));
    socket.on("close", () => this.close(this.reader.partial ? new Error("pipe closed inside a frame") : undefined));
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /**
   * True while producers should wait for whenWritable: the socket is backed up, or this turn's
   * batch is already large (a handler writing in a loop gets `false` within the turn, as from an
   * HTTP/2 stream, instead of growing the batch until the turn ends).
   */
  get backedUp(): boolean {
    return this.socketBackedUp || this.batchBytes >= BATCH_BYTES_HIGH;
  }

  /** Queues a frame for this turn's write. */
  send<K extends FrameKind>(kind: K, id: number, values: FrameValues<K>): void {
    if (this.isClosed) return;
    const bytes = frameBytes(kind, values);
    const out = this.room(bytes);
    const end = writeFrame(out, this.batchBytes, kind, id, values);
    if (end !== this.batchBytes + bytes) throw new Error(`front-end pipe: frame kind ${kind} wrote ${end - this.batchBytes} bytes of ${bytes}`);
    this.batchBytes = end;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(flushPipe, this);
    }
  }

  /** The output buffer with `bytes` free after the turn's frames so far. */
  private room(bytes: number): Buffer {
    const need = this.batchBytes + bytes;
    if (this.out !== undefined && this.out.length >= need) return this.out;
    const grown = Buffer.allocUnsafeSlow(Math.max(need, OUT_BYTES_INITIAL, 2 * (this.out?.length ?? 0)));
    this.out?.copy(grown, 0, 0, this.batchBytes);
    this.out = grown;
    return grown;
  }

  /** Writes the turn's frames as one buffer. */
  flush(): void {
    this.flushScheduled = false;
    const out = this.out;
    if (out === undefined || this.batchBytes === 0 || this.isClosed) return;
    const bytes = this.batchBytes;
    this.batchBytes = 0;
    const ok = this.socket.write(out.subarray(0, bytes));
    // Written through at once (the usual case), the buffer is ours again; else the socket holds a
    // view of it until sent, and the next turn takes a new one. A buffer a large frame grew is
    // not kept.
    if (this.socket.writableLength !== 0 || out.length > OUT_BYTES_KEPT_MAX) this.out = undefined;
    if (!ok) this.socketBackedUp = true;
    else this.releaseWaiters();
  }

  /** Resolves once the pipe is not backed up (at once if it is not, or once it closed). */
  whenWritable(): Promise<void> {
    if (!this.backedUp || this.isClosed) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  /** Flushes what is queued and ends the pipe. */
  end(): void {
    this.flush();
    this.socket.end();
  }

  private close(error: Error | undefined): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.releaseWaiters();
    this.socket.destroy();
    this.events.closed(error);
  }

  private releaseWaiters(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const resolve of waiters) resolve();
  }
}

function flushPipe(pipe: FramePipe): void {
  pipe.flush();
}
