/** Where the watch memory model is sampled. Pure. */

/** Design points that separate the three variables (see fit.ts): conns, then streams, then watchers vary. */
export function watchDesign(cm: number, sm: number, wm: number): Array<[number, number, number]> {
  const c0 = Math.max(1, Math.round(cm / 10));
  return [
    [c0, c0, c0],
    [Math.round(cm / 2), Math.round(cm / 2), Math.round(cm / 2)],
    [cm, cm, cm],
    [c0, Math.round(sm / 2), Math.round(sm / 2)],
    [c0, sm, sm],
    [c0, c0, Math.round(wm / 2)],
    [c0, c0, wm],
    [cm, sm, wm],
  ];
}
