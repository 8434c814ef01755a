/**
 * The Huffman code of HPACK (RFC 7541, Appendix B), decoding only. The code is
 * canonical, so the 257 code lengths below (symbols 0..255 and EOS) determine
 * every code word; the tree is built from them once at load.
 */

import { HpackError } from "./hpack-error.js";

/** Code length in bits of each symbol 0..255, then EOS (256). */
// prettier-ignore
const CODE_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];

const EOS = 256;

export interface HuffmanCode {
  code: number;
  bits: number;
}

/** Canonical code words: ordered by (length, symbol), each the previous + 1, shifted to its length. */
function canonicalCodes(): HuffmanCode[] {
  const symbols = CODE_LENGTHS.map((_, s) => s).sort((a, b) => CODE_LENGTHS[a]! - CODE_LENGTHS[b]! || a - b);
  const codes: HuffmanCode[] = new Array<HuffmanCode>(CODE_LENGTHS.length);
  let code = 0;
  let bits = CODE_LENGTHS[symbols[0]!]!;
  for (const symbol of symbols) {
    const length = CODE_LENGTHS[symbol]!;
    code = code * 2 ** (length - bits);
    bits = length;
    codes[symbol] = { code, bits };
    code++;
  }
  return codes;
}

/** The code word of every symbol (exported for tests). */
export const HUFFMAN_CODES: readonly HuffmanCode[] = canonicalCodes();

/**
 * The decoding tree: node n has children CHILD[2n] (bit 0) and CHILD[2n+1]
 * (bit 1); a child >= 0 is an inner node, a child < 0 is the leaf of symbol
 * -child-1. 256 inner nodes for 257 leaves.
 */
const CHILD = buildTree();

function buildTree(): Int16Array {
  const child = new Int16Array(2 * 256).fill(0);
  let nodes = 1;
  HUFFMAN_CODES.forEach(({ code, bits }, symbol) => {
    let node = 0;
    for (let i = bits - 1; i >= 0; i--) {
      const slot = 2 * node + (Math.floor(code / 2 ** i) & 1);
      if (i === 0) {
        child[slot] = -symbol - 1;
      } else {
        if (child[slot] === 0) child[slot] = nodes++;
        node = child[slot]!;
      }
    }
  });
  if (nodes !== 256) throw new Error(`HPACK Huffman tree has ${nodes} inner nodes, expected 256`);
  return child;
}

/**
 * Decodes the Huffman-coded octets src[start, end) to a latin1 string (one
 * char per octet). Throws HpackError on the EOS symbol, on padding longer than
 * 7 bits or on padding that is not the most significant bits of EOS (all ones).
 */
export function huffmanDecode(src: Uint8Array, start: number, end: number): string {
  // The shortest code is 5 bits: at most 8/5 symbols per octet.
  const out = Buffer.allocUnsafe(Math.ceil(((end - start) * 8) / 5));
  let n = 0;
  let node = 0;
  let pendingBits = 0;
  let pendingAllOnes = true;
  for (let i = start; i < end; i++) {
    const octet = src[i]!;
    for (let shift = 7; shift >= 0; shift--) {
      const bit = (octet >> shift) & 1;
      const next = CHILD[2 * node + bit]!;
      if (next < 0) {
        const symbol = -next - 1;
        if (symbol === EOS) throw new HpackError("Huffman string contains EOS");
        out[n++] = symbol;
        node = 0;
        pendingBits = 0;
        pendingAllOnes = true;
      } else {
        node = next;
        pendingBits++;
        if (bit === 0) pendingAllOnes = false;
      }
    }
  }
  if (pendingBits > 7) throw new HpackError("Huffman padding longer than 7 bits");
  if (!pendingAllOnes) throw new HpackError("Huffman padding is not a prefix of EOS");
  return out.toString("latin1", 0, n);
}
