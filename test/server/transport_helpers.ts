/** Loopback helpers for the transport tests. */
import { Writable } from "node:stream";
import { pino, type Logger } from "pino";
import { type Message, MessageType, type NodeId } from "../../src/raft/types.js";
import { type SnapshotSinkFactory, Transport, type TransportLimits, type TransportOptions } from "../../src/server/transport/transport.js";

export interface LogLine {
  level: string;
  msg: string;
  [k: string]: unknown;
}

/** A logger whose lines are kept for assertions. */
export function captureLogger(): { logger: Logger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const l of chunk.toString().split("\n")) if (l !== "") lines.push(JSON.parse(l) as LogLine);
      cb();
    },
  });
  const logger = pino({ level: "debug", messageKey: "msg", base: null, formatters: { level: (label) => ({ level: label }) } }, sink);
  return { logger, lines };
}

export interface Node {
  id: NodeId;
  transport: Transport;
  received: Message[];
  unreachable: NodeId[];
  snapshotStatus: Array<{ id: NodeId; failed: boolean }>;
  lines: LogLine[];
  url: string;
}

export async function startNode(
  id: NodeId,
  opts: { clusterId?: bigint; port?: number; limits?: Partial<TransportLimits>; snapshotSink?: SnapshotSinkFactory; snapshotBase?: TransportOptions["snapshotBase"] } = {},
): Promise<Node> {
  const { logger, lines } = captureLogger();
  const node: Partial<Node> & { received: Message[]; unreachable: NodeId[]; snapshotStatus: Array<{ id: NodeId; failed: boolean }> } = {
    id,
    received: [],
    unreachable: [],
    snapshotStatus: [],
    lines,
  };
  const transport = new Transport({
    localId: id,
    clusterId: opts.clusterId ?? 0xc1n,
    clusterToken: "test-cluster",
    listenUrls: [`http://127.0.0.1:${opts.port ?? 0}`],
    onMessage: (m) => node.received.push(m),
    onUnreachable: (peer) => node.unreachable.push(peer),
    onSnapshotStatus: (peer, failed) => node.snapshotStatus.push({ id: peer, failed }),
    logger,
    limits: { backoffInitialMs: 20, backoffMaxMs: 200, ...opts.limits },
    ...(opts.snapshotSink === undefined ? {} : { snapshotSink: opts.snapshotSink }),
    ...(opts.snapshotBase === undefined ? {} : { snapshotBase: opts.snapshotBase }),
  });
  await transport.start();
  node.transport = transport;
  node.url = `http://127.0.0.1:${transport.listenAddresses()[0]!.port}`;
  return node as Node;
}

/** Makes every node a peer of every other. */
export function connectAll(nodes: readonly Node[]): void {
  for (const a of nodes) for (const b of nodes) if (a !== b) a.transport.addPeer(b.id, [b.url]);
}

/** Polls `cond` every 5 ms; fails after `limitMs` (a generous bound, not a timing assertion). */
export async function waitFor(cond: () => boolean, what: string, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export function msg(from: NodeId, to: NodeId, index: number, extra: Partial<Message> = {}): Message {
  return {
    type: MessageType.MsgApp,
    to,
    from,
    term: 1,
    logTerm: 1,
    index,
    entries: [{ term: 1, index: index + 1, type: 0, data: Buffer.from(`entry-${index}`) }],
    commit: index,
    reject: false,
    rejectHint: 0,
    context: new Uint8Array(),
    ...extra,
  };
}
