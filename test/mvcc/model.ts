/**
 * A deliberately naive reference model of etcd's key space: a full copy of
 * the key → kv map for every revision. Used by the property tests to check
 * the real store (index + backend + staged compaction) against.
 */

export interface MKv {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  version: number;
  lease: number;
}

export type MRange = { key: string; end?: string }; // end '' = to infinity

export interface MRangeReq {
  key: string;
  end?: string;
  revision: number;
  limit: number;
  sortOrder: number;
  sortTarget: number;
  keysOnly: boolean;
  countOnly: boolean;
  minMod: number;
  maxMod: number;
  minCreate: number;
  maxCreate: number;
}

export interface MCompare {
  key: string;
  end?: string;
  target: number; // 0 VERSION 1 CREATE 2 MOD 3 VALUE 4 LEASE
  result: number; // 0 EQUAL 1 GREATER 2 LESS 3 NOT_EQUAL
  num: number;
  value: string;
}

export type MOp =
  | { range: MRangeReq }
  | { put: { key: string; value: string; prevKv: boolean; ignoreValue: boolean } }
  | { del: { key: string; end?: string; prevKv: boolean } }
  | { txn: MTxn };

export interface MTxn {
  compare: MCompare[];
  success: MOp[];
  failure: MOp[];
}

export class ModelError extends Error {}

function inRange(k: string, r: MRange): boolean {
  if (r.end === undefined) return k === r.key;
  if (r.end === '') return k >= r.key;
  return k >= r.key && k < r.end;
}

export class Model {
  /** states[rev] = key space after revision rev (rev 1 = empty). */
  states: Map<string, MKv>[] = [new Map(), new Map()];
  compacted = -1;

  get rev(): number {
    return this.states.length - 1;
  }

  stateAt(rev: number): Map<string, MKv> {
    if (rev > this.rev) throw new ModelError('future');
    if (rev <= 0) rev = this.rev;
    if (rev < this.compacted) throw new ModelError('compacted');
    return this.states[rev]!;
  }

  range(req: MRangeReq, work?: Map<string, MKv>, workRev?: number): { kvs: MKv[]; more: boolean; count: number } {
    const cur = workRev ?? this.rev;
    let rev = req.revision;
    if (rev > cur) throw new ModelError('future');
    if (rev <= 0) rev = cur;
    if (rev < this.compacted) throw new ModelError('compacted');
    const state = work !== undefined && rev === cur ? work : this.states[rev]!;
    let kvs = [...state.values()].filter((kv) => inRange(kv.key, req)).sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    const count = kvs.length;
    if (req.countOnly) return { kvs: [], more: false, count };
    // etcd quirk: with sort order NONE and no filters, only limit+1 keys (in key order) are fetched,
    // and a non-KEY sort target then sorts just those.
    if (req.sortOrder === 0 && !req.minMod && !req.maxMod && !req.minCreate && !req.maxCreate && req.limit > 0) {
      kvs = kvs.slice(0, req.limit + 1);
    }
    if (req.maxMod) kvs = kvs.filter((kv) => kv.modRevision <= req.maxMod);
    if (req.minMod) kvs = kvs.filter((kv) => kv.modRevision >= req.minMod);
    if (req.maxCreate) kvs = kvs.filter((kv) => kv.createRevision <= req.maxCreate);
    if (req.minCreate) kvs = kvs.filter((kv) => kv.createRevision >= req.minCreate);
    let order = req.sortOrder;
    if (req.sortTarget !== 0 && order === 0) order = 1;
    if (order !== 0) {
      const field = (kv: MKv): number | string =>
        [kv.key, kv.version, kv.createRevision, kv.modRevision, kv.value][req.sortTarget]!;
      const cmp = (a: MKv, b: MKv): number => {
        const x = field(a);
        const y = field(b);
        return x < y ? -1 : x > y ? 1 : 0;
      };
      kvs = kvs.slice().sort(order === 1 ? cmp : (a, b) => cmp(b, a));
    }
    let more = false;
    if (req.limit > 0 && kvs.length > req.limit) {
      kvs = kvs.slice(0, req.limit);
      more = true;
    }
    if (req.keysOnly) kvs = kvs.map((kv) => ({ ...kv, value: '' }));
    return { kvs, more, count };
  }

  /** Applies ops as one revision; returns responses. */
  private write(f: (work: Map<string, MKv>, newRev: number) => unknown): unknown {
    const work = new Map(this.states[this.rev]!);
    const before = this.rev;
    const newRev = before + 1;
    const out = f(work, newRev);
    if (this.changed) this.states.push(work);
    this.changed = false;
    return out;
  }

  private changed = false;

  private doPut(work: Map<string, MKv>, newRev: number, p: { key: string; value: string; prevKv: boolean; ignoreValue: boolean }): unknown {
    const prev = work.get(p.key);
    if (p.ignoreValue && prev === undefined) throw new ModelError('key not found');
    const value = p.ignoreValue ? prev!.value : p.value;
    work.set(p.key, {
      key: p.key,
      value,
      createRevision: prev ? prev.createRevision : newRev,
      modRevision: newRev,
      version: prev ? prev.version + 1 : 1,
      lease: 0,
    });
    this.changed = true;
    return { prevKv: p.prevKv ? prev : undefined };
  }

  private doDel(work: Map<string, MKv>, d: { key: string; end?: string; prevKv: boolean }): unknown {
    const hit = [...work.values()].filter((kv) => inRange(kv.key, d)).sort((a, b) => (a.key < b.key ? -1 : 1));
    for (const kv of hit) work.delete(kv.key);
    if (hit.length > 0) this.changed = true;
    return { deleted: hit.length, prevKvs: d.prevKv ? hit : [] };
  }

  put(p: { key: string; value: string; prevKv: boolean; ignoreValue: boolean }): unknown {
    return this.write((w, r) => this.doPut(w, r, p));
  }

  del(d: { key: string; end?: string; prevKv: boolean }): unknown {
    return this.write((w) => this.doDel(w, d));
  }

  private compareOk(state: Map<string, MKv>, c: MCompare): boolean {
    const kvs = [...state.values()].filter((kv) => inRange(kv.key, c));
    const one = (kv: MKv | undefined): boolean => {
      let r: number;
      if (c.target === 3) {
        const v = kv ? kv.value : '';
        r = v < c.value ? -1 : v > c.value ? 1 : 0;
      } else {
        const x = kv ? [kv.version, kv.createRevision, kv.modRevision, 0, kv.lease][c.target]! : 0;
        r = x < c.num ? -1 : x > c.num ? 1 : 0;
      }
      return [r === 0, r > 0, r < 0, r !== 0][c.result]!;
    };
    if (kvs.length === 0) return c.target === 3 ? false : one(undefined);
    return kvs.every(one);
  }

  txn(t: MTxn): unknown {
    const pre = this.states[this.rev]!;
    // Decide every branch (nested included) on the state before the txn.
    interface Plan {
      ok: boolean;
      nested: Plan[];
    }
    const decide = (tx: MTxn): Plan => {
      const ok = tx.compare.every((c) => this.compareOk(pre, c));
      const ops = ok ? tx.success : tx.failure;
      return { ok, nested: ops.filter((o): o is { txn: MTxn } => 'txn' in o).map((o) => decide(o.txn)) };
    };
    const plan = decide(t);
    // Checks before any write: ignoreValue needs the key; ranges at explicit revisions must be valid.
    const check = (tx: MTxn, p: Plan): void => {
      let n = 0;
      for (const op of p.ok ? tx.success : tx.failure) {
        if ('put' in op && op.put.ignoreValue && !pre.has(op.put.key)) throw new ModelError('key not found');
        if ('txn' in op) check(op.txn, p.nested[n++]!);
      }
    };
    check(t, plan);
    const checkRanges = (tx: MTxn, p: Plan): void => {
      let n = 0;
      for (const op of p.ok ? tx.success : tx.failure) {
        if ('range' in op && op.range.revision !== 0) {
          if (op.range.revision > this.rev) throw new ModelError('future');
          if (op.range.revision < this.compacted) throw new ModelError('compacted');
        }
        if ('txn' in op) checkRanges(op.txn, p.nested[n++]!);
      }
    };
    checkRanges(t, plan);
    return this.write((work, newRev) => {
      const run = (tx: MTxn, p: Plan): unknown => {
        let n = 0;
        const responses: unknown[] = [];
        for (const op of p.ok ? tx.success : tx.failure) {
          if ('range' in op) responses.push({ range: this.range(op.range, work, this.changed ? newRev : newRev - 1) });
          else if ('put' in op) responses.push({ put: this.doPut(work, newRev, op.put) });
          else if ('del' in op) responses.push({ del: this.doDel(work, op.del) });
          else responses.push({ txn: run(op.txn, p.nested[n++]!) });
        }
        return { succeeded: p.ok, responses };
      };
      return run(t, plan);
    });
  }

  compact(rev: number): void {
    if (rev <= this.compacted) throw new ModelError('compacted');
    if (rev > this.rev) throw new ModelError('future');
    this.compacted = rev;
  }
}
