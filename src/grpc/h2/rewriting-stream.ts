/**
 * The socket as nghttp2 sees it on a connection that needs the
 * AuthorityRewriter: client bytes pass through the rewriter, server bytes go
 * to the socket untouched. node:http2 wraps any non-native stream in its
 * JSStreamSocket, so this is a plain Duplex; it costs ~40% more CPU per
 * request than the native socket, which is why only gated-in connections
 * get one (first-request-gate.ts).
 *
 * How it ends: only ever by destroy(), and never with an error. JSStreamSocket
 * (node v20 lib/internal/js_stream_socket.js) asserts in doWrite that no
 * shutdown is in flight, and nghttp2 writes whenever it likes:
 * - an 'error' here is re-emitted by JSStreamSocket while it is still alive;
 *   http2's socketOnError then destroys the session, which writes its GOAWAY
 *   at once (Http2Session::Close with socket_closed false);
 * - a client EOF passed on (push(null)) makes JSStreamSocket, a net.Socket
 *   without allowHalfOpen, end() itself: doShutdown, in flight until our
 *   _final's socket.end() calls back.
 * Together (client FIN, then EPIPE/ECONNRESET on a response write) the GOAWAY
 * hit the in-flight shutdown: ERR_INTERNAL_ASSERTION, an uncaught exception
 * that killed the member. A destroy without error only emits 'close', on which
 * JSStreamSocket destroys itself and http2 then closes the session over a
 * destroyed socket, writing nothing. A client half-close ends the connection
 * here as it does on a native socket (nghttp2 cannot answer after it anyway).
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
    socket.once("end", () => this.destroy());
    socket.once("close", () => this.destroy());
    socket.on("error", () => this.destroy());
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
    } catch {
      // The client broke HTTP/2 framing or HPACK: the connection ends (see the file comment for why without an error).
      this.destroy();
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

  override _destroy(_error: Error | null, callback: (error?: Error | null) => void): void {
    this.socket.destroy();
    // Also an error raised by the stream machinery itself (a write after end...): never an 'error' event (file comment).
    callback(null);
  }
}
