/** bbolt, the file format of etcd's backend: a reader and a streaming writer. */
export { BoltFormatError, BoltWriterError } from "./errors.js";
export { BoltReader, type BoltBucket, type BoltEntry, type BoltReaderOptions } from "./reader.js";
export { BoltWriter, type BoltWriterOptions, type BoltWriteResult } from "./writer.js";
export { BufferPageSink, FilePageSink, type PageSink } from "./page_sink.js";
export { BufferPageSource, FilePageSource, type PageSource } from "./page_source.js";
export { fnv1a64, type Meta } from "./meta.js";
export { streamBolt, yieldEveryPause, type BoltProducer, type BoltStreamOptions, type Pause } from "./stream.js";
