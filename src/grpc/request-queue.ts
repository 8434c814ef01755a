/**
 * The receiving side of a streaming call: a bounded queue between the transport
 * and the handler. When the handler falls behind, the transport is paused, so
 * HTTP/2 flow control pushes back on the client instead of memory growing.
 */

import type { ServerReadable } from "./handler.js";
import { GrpcError, Status } from "./status.js";

/** The transport's read switch. */
export interface FlowControl {
  pause(): void;
  resume(): void;
}

/** Messages buffered before the transport is paused. */
export const REQUEST_QUEUE_MESSAGES_MAX = 16;

interface Waiter<T> {
  resolve(result: IteratorResult<T>): void;
  reject(error: Error): void;
}

export class RequestQueue<T> implements ServerReadable<T> {
  private readonly flow: FlowControl;
  private buffered: T[] = [];
  private ended = false;
  private error: Error | undefined;
  private waiter: Waiter<T> | undefined;
  private listener: ((message: T) => void) | undefined;
  private endListener: (() => void) | undefined;
  private iterating = false;
  private userPaused = false;
  private flowPaused = false;

  constructor(flow: FlowControl) {
    this.flow = flow;
  }

  /** Transport side: one decoded message. */
  push(message: T): void {
    if (this.ended || this.error) return;
    const waiter = this.waiter;
    if (waiter) {
      this.waiter = undefined;
      waiter.resolve({ value: message, done: false });
      return;
    }
    if (this.listener && !this.userPaused && this.buffered.length === 0) {
      this.listener(message);
      return;
    }
    this.buffered.push(message);
    if (this.buffered.length >= REQUEST_QUEUE_MESSAGES_MAX) this.pauseFlow();
  }

  /** Transport side: the client half-closed. */
  end(): void {
    if (this.ended || this.error) return;
    this.ended = true;
    if (this.buffered.length === 0) this.finishEnd();
  }

  /** Transport side: the call died (cancel, deadline, shutdown); pending reads fail. */
  destroy(error: Error): void {
    if (this.error) return;
    this.error = error;
    this.buffered = [];
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.reject(error);
  }

  private finishEnd(): void {
    const waiter = this.waiter;
    this.waiter = undefined;
    waiter?.resolve({ value: undefined, done: true });
    const endListener = this.endListener;
    this.endListener = undefined;
    endListener?.();
  }

  private pauseFlow(): void {
    if (this.flowPaused) return;
    this.flowPaused = true;
    this.flow.pause();
  }

  private resumeFlow(): void {
    if (!this.flowPaused || this.userPaused) return;
    this.flowPaused = false;
    this.flow.resume();
  }

  onMessage(listener: (message: T) => void): void {
    if (this.iterating) throw new Error("onMessage: the request stream is already being iterated");
    this.listener = listener;
    this.flushToListener();
  }

  onEnd(listener: () => void): void {
    this.endListener = listener;
    if (this.ended && this.buffered.length === 0) this.finishEnd();
  }

  pause(): void {
    this.userPaused = true;
    this.pauseFlow();
  }

  resume(): void {
    this.userPaused = false;
    this.flushToListener();
    if (this.buffered.length < REQUEST_QUEUE_MESSAGES_MAX) this.resumeFlow();
  }

  private flushToListener(): void {
    const listener = this.listener;
    if (!listener) return;
    while (this.buffered.length > 0 && !this.userPaused && !this.error) listener(this.buffered.shift()!);
    if (this.buffered.length === 0 && this.ended) this.finishEnd();
    if (this.buffered.length < REQUEST_QUEUE_MESSAGES_MAX) this.resumeFlow();
  }

  private next(): Promise<IteratorResult<T>> {
    if (this.error) return Promise.reject(this.error);
    if (this.buffered.length > 0) {
      const value = this.buffered.shift()!;
      if (this.buffered.length < REQUEST_QUEUE_MESSAGES_MAX / 2) this.resumeFlow();
      if (this.buffered.length === 0 && this.ended) this.finishEnd();
      return Promise.resolve({ value, done: false });
    }
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    if (this.waiter) return Promise.reject(new Error("concurrent reads of one request stream"));
    return new Promise((resolve, reject) => {
      this.waiter = { resolve, reject };
    });
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    if (this.listener) throw new Error("iterate: the request stream already has an onMessage listener");
    this.iterating = true;
    return {
      next: () => this.next(),
      return: () => {
        // The handler stopped iterating early: keep reading so the stream can end.
        this.listener = () => {};
        this.flushToListener();
        return Promise.resolve({ value: undefined, done: true });
      },
    };
  }
}

/** The error pending reads see when the client cancels. */
export function cancelledError(reason: string): GrpcError {
  return new GrpcError(Status.CANCELLED, reason);
}
