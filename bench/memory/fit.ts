/**
 * Ordinary least squares for the watch memory model
 *   memory = c0 + c1·connections + c2·streams + c3·watchers
 * (etcd's published fit: c1 ≈ 17 KB, c2 ≈ 18 KB, c3 ≈ 350 B). Pure.
 */

export interface FitResult {
  /** Coefficients, intercept first, then one per column of X. */
  coefficients: number[];
  /** Coefficient of determination of the fit. */
  r2: number;
  residuals: number[];
}

/** Solves A·x = b by Gaussian elimination with partial pivoting; throws when A is singular. */
export function solveLinear(a: number[][], b: number[]): number[] {
  const n = b.length;
  if (a.length !== n || a.some((row) => row.length !== n)) throw new Error("solveLinear: A must be n×n with n = len(b)");
  const m = a.map((row, i) => [...row, b[i] as number]);
  for (let col = 0; col < n; col++) {
    let pivot = col;
    for (let r = col + 1; r < n; r++) if (Math.abs(m[r]![col]!) > Math.abs(m[pivot]![col]!)) pivot = r;
    const scale = Math.max(...m.map((row) => Math.abs(row[col]!)), 1e-300);
    if (Math.abs(m[pivot]![col]!) <= 1e-12 * scale) throw new Error("solveLinear: singular system (the design does not separate the variables)");
    [m[col], m[pivot]] = [m[pivot]!, m[col]!];
    for (let r = 0; r < n; r++) {
      if (r === col) continue;
      const f = m[r]![col]! / m[col]![col]!;
      if (f === 0) continue;
      for (let c = col; c <= n; c++) m[r]![c] = m[r]![c]! - f * m[col]![c]!;
    }
  }
  return m.map((row, i) => row[n]! / row[i]!);
}

/**
 * Fits y ≈ c0 + Σ cj·x[j] over the samples. Columns are scaled to unit maximum before solving
 * the normal equations so that connections (~10³) and watchers (~10⁶) condition alike.
 */
export function leastSquares(xs: readonly number[][], ys: readonly number[]): FitResult {
  const n = ys.length;
  const k = (xs[0]?.length ?? 0) + 1;
  if (xs.length !== n) throw new Error("leastSquares: one row of X per y");
  if (n < k) throw new Error(`leastSquares: need at least ${k} samples, got ${n}`);
  const design = xs.map((row) => [1, ...row]);
  const scale = Array.from({ length: k }, (_, j) => Math.max(...design.map((r) => Math.abs(r[j]!)), 1e-300));
  const z = design.map((r) => r.map((v, j) => v / scale[j]!));
  const ata = Array.from({ length: k }, (_, i) => Array.from({ length: k }, (_, j) => z.reduce((s, r) => s + r[i]! * r[j]!, 0)));
  const aty = Array.from({ length: k }, (_, i) => z.reduce((s, r, row) => s + r[i]! * ys[row]!, 0));
  const coefficients = solveLinear(ata, aty).map((c, j) => c / scale[j]!);
  const predicted = design.map((r) => r.reduce((s, v, j) => s + v * coefficients[j]!, 0));
  const residuals = ys.map((y, i) => y - predicted[i]!);
  const mean = ys.reduce((s, y) => s + y, 0) / n;
  const ssTot = ys.reduce((s, y) => s + (y - mean) ** 2, 0);
  const ssRes = residuals.reduce((s, r) => s + r * r, 0);
  return { coefficients, r2: ssTot === 0 ? 1 : 1 - ssRes / ssTot, residuals };
}
