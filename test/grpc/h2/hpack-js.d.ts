/** The parts of hpack.js (an independent HPACK implementation) the tests use as an oracle. */
declare module "hpack.js" {
  import type { Duplex } from "node:stream";

  export interface HpackHeader {
    name: string;
    value: string;
    /** Huffman-code the strings (default true). */
    huffman?: boolean;
    /** Literal with incremental indexing (default true). */
    incremental?: boolean;
    neverIndex?: boolean;
  }

  export interface Compressor extends Duplex {
    write(headers: HpackHeader[]): boolean;
    read(): Buffer | null;
  }

  export interface Decompressor extends Duplex {
    write(block: Buffer): boolean;
    execute(): void;
    read(): { name: string; value: string; neverIndex: boolean } | null;
  }

  const hpack: {
    compressor: { create(options: { table: { maxSize: number } }): Compressor };
    decompressor: { create(options: { table: { maxSize: number } }): Decompressor };
    huffman: { encode: [number, number][] };
    "static-table": { table: { name: string; value: string }[] };
  };
  export default hpack;
}
