/**
 * A bbolt file produced strictly front to back, for streaming it where nothing can be patched
 * afterwards (a Maintenance.Snapshot response stream). The meta pages come first in the file but
 * name the root page, which is known only once every key is written; so the input is written
 * twice: a planning pass that keeps nothing but the meta pages, then the real pass, which emits
 * the planned meta pages first and then every page as it fills. The layout depends only on the
 * sequence of bucket names and key/value sizes, so both passes must see the same input (read it
 * from one consistent view, e.g. one read transaction); the second pass checks that its meta
 * pages equal the planned ones and throws if the input changed.
 */

import { BoltWriterError } from "./errors.js";
import type { PageSink } from "./page_sink.js";
import { BoltWriter, type BoltWriteResult, type BoltWriterOptions } from "./writer.js";

/**
 * Called between records by the producer; returns a promise only when the producer should wait
 * (queued pages to hand on, or a turn for the event loop), so the fast path costs no promise.
 */
export type Pause = () => Promise<void> | undefined;

/** A turn for the event loop every `every` calls (a Pause for producers with no queue to drain). */
export function yieldEveryPause(every: number): Pause {
  let calls = 0;
  return () => (++calls % every === 0 ? new Promise<void>((resolve) => setImmediate(resolve)) : undefined);
}

/** Feeds the whole input to `w`, calling `pause` between records. Called once per pass. */
export type BoltProducer = (w: BoltWriter, pause: Pause) => Promise<void>;

export interface BoltStreamOptions extends BoltWriterOptions {
  /** Queued bytes that make the producer wait for `emit`; default 1 MiB. */
  queueBytesMax?: number;
  /** Records between event-loop turns in the planning pass; default 1000. */
  yieldEvery?: number;
}

class PlanningSink implements PageSink {
  metas: Uint8Array | undefined;
  write(): void {}
  writeMeta(bytes: Uint8Array): void {
    this.metas = Uint8Array.from(bytes);
  }
}

class ForwardSink implements PageSink {
  readonly queue: Uint8Array[];
  queuedBytes: number;
  private next: number;
  private readonly metas: Uint8Array;

  constructor(metas: Uint8Array) {
    this.metas = metas;
    this.queue = [metas];
    this.queuedBytes = metas.length;
    this.next = metas.length;
  }

  write(offset: number, bytes: Uint8Array): void {
    if (offset !== this.next) throw new BoltWriterError(`stream: pages at offset ${offset}, expected ${this.next}`);
    this.queue.push(bytes);
    this.queuedBytes += bytes.length;
    this.next += bytes.length;
  }

  writeMeta(bytes: Uint8Array): void {
    if (!Buffer.from(bytes).equals(this.metas)) {
      throw new BoltWriterError("stream: the input changed between the planning pass and the writing pass (the bytes sent are not a valid file)");
    }
  }
}

/**
 * Streams a bbolt file through `emit` (awaited: its backpressure is the producer's). `onPlanned`
 * learns the file size before the first byte is emitted.
 */
export async function streamBolt(
  produce: BoltProducer,
  emit: (chunk: Uint8Array) => Promise<void> | void,
  options: BoltStreamOptions & { onPlanned?: (result: BoltWriteResult) => void } = {},
): Promise<BoltWriteResult> {
  const turn = yieldEveryPause(options.yieldEvery ?? 1000);

  const plan = new PlanningSink();
  const planner = new BoltWriter(plan, options);
  await produce(planner, turn);
  const planned = planner.finish();
  options.onPlanned?.(planned);

  const sink = new ForwardSink(plan.metas!);
  const queueBytesMax = options.queueBytesMax ?? 1 << 20;
  const drain = async (): Promise<void> => {
    while (sink.queue.length > 0) {
      const chunk = sink.queue.shift()!;
      sink.queuedBytes -= chunk.length;
      await emit(chunk);
    }
  };
  const pause: Pause = () => (sink.queuedBytes >= queueBytesMax ? drain() : turn());
  const writer = new BoltWriter(sink, options);
  await produce(writer, pause);
  const result = writer.finish();
  await drain();
  if (result.sizeBytes !== planned.sizeBytes) throw new BoltWriterError(`stream: wrote ${result.sizeBytes} bytes, planned ${planned.sizeBytes}`);
  return result;
}
