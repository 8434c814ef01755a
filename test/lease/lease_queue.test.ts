import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { LeaseQueue } from "../../src/lease/lease_queue.js";
import { testSeed } from "../seed.js";

interface Item {
  id: number;
  key: number;
  index: number;
}

const SEED = testSeed("lease_queue");

function queue(): LeaseQueue<Item> {
  return new LeaseQueue<Item>({
    key: (i) => i.key,
    getIndex: (i) => i.index,
    setIndex: (i, index) => {
      i.index = index;
    },
  });
}

type Op = { kind: "upsert"; id: number; key: number } | { kind: "remove"; id: number } | { kind: "pop" } | { kind: "clear" };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ kind: fc.constant("upsert" as const), id: fc.integer({ min: 0, max: 30 }), key: fc.integer({ min: 0, max: 50 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("remove" as const), id: fc.integer({ min: 0, max: 30 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant("pop" as const) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant("clear" as const) }) },
);

describe("LeaseQueue", () => {
  it(`behaves as a keyed set ordered by key (seed ${SEED}, replay with SEED=...)`, () => {
    fc.assert(
      fc.property(fc.array(opArb, { maxLength: 200, size: "max" }), (ops) => {
        const q = queue();
        const items = new Map<number, Item>();
        const model = new Map<number, number>(); // id -> key of queued items
        const item = (id: number): Item => {
          let it = items.get(id);
          if (it === undefined) {
            it = { id, key: 0, index: -1 };
            items.set(id, it);
          }
          return it;
        };
        for (const op of ops) {
          if (op.kind === "upsert") {
            const it = item(op.id);
            it.key = op.key;
            q.upsert(it);
            model.set(op.id, op.key);
          } else if (op.kind === "remove") {
            q.remove(item(op.id));
            model.delete(op.id);
          } else if (op.kind === "pop") {
            const top = q.pop();
            if (model.size === 0) {
              expect(top).toBeUndefined();
            } else {
              const min = Math.min(...model.values());
              expect(top?.key).toBe(min);
              expect(top?.index).toBe(-1);
              model.delete(top?.id ?? -1);
            }
          } else {
            q.clear();
            model.clear();
          }
          // Plain checks (not expect) in the hot loop: vitest's expect is slow over thousands of steps.
          if (q.size !== model.size) throw new Error(`size ${q.size} != model ${model.size}`);
          for (const [id, it] of items) {
            if (q.has(it) !== model.has(id)) throw new Error(`membership of ${id} differs from the model`);
          }
          if (model.size > 0 && q.peek()?.key !== Math.min(...model.values())) throw new Error("peek is not the minimum");
        }
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});
