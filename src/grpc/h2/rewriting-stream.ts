/**
 * The socket as nghttp2 sees it on a connection that needs the
 * AuthorityRewriter: client bytes pass through the rewriter, server bytes go
 * to the socket untouched. node:http2 wraps any non-native stream in its
 * JSStreamSocket, so this is a plain Duplex; it costs ~40% more CPU per
 * request than the native socket, which is why only gated-in connections
 * get one (first-request-gate.ts).
 */

import type { Socket } from "node:net";
import { Duplex } from "node:stream";
import type { AuthorityRewriter } from "./authority-rewriter.js";

export class RewritingStream extends Duplex {
  constructor(
    private readonly socket: Socket,
    private readonly rewriter: AuthorityRewriter,
    initial: Buffer,
  ) {
    super({ allowHalfOpen: false });
    // node:http2 disables Nagle on the socket it is given; this one is not it.
    socket.setNoDelay(true);
    socket.on("data", (chunk: Buffer) => this.fromClient(chunk));
    socket.once("end", () => this.push(null));
    socket.once("close", () => this.destroy());
    socket.on("error", (err: Error) => this.destroy(err));
    if (initial.length > 0) this.fromClient(initial);
  }

  /** Peer address, for CallContext.peer (node:http2 hides the socket behind its wrapper). */
  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  get remotePort(): number | undefined {
    return this.socket.remotePort;
  }

  /** Header blocks translated and :authority values repaired on this connection. */
  get stats(): { blocks: number; repaired: number } {
    return { blocks: this.rewriter.blocks, repaired: this.rewriter.repaired };
  }

  private fromClient(chunk: Buffer): void {
    let pieces: Buffer[];
    try {
      pieces = this.rewriter.push(chunk);
    } catch (err) {
      this.destroy(err as Error);
      return;
    }
    let more = true;
    for (const piece of pieces) more = this.push(piece);
    if (!more) this.socket.pause();
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.socket.write(chunk, callback);
  }

  override _writev(chunks: { chunk: Buffer }[], callback: (error?: Error | null) => void): void {
    this.socket.cork();
    for (let i = 0; i < chunks.length - 1; i++) this.socket.write(chunks[i]!.chunk);
    this.socket.write(chunks[chunks.length - 1]!.chunk, callback);
    this.socket.uncork();
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.socket.end(callback);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.socket.destroy();
    callback(error);
  }
}
