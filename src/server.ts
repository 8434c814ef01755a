/**
 * Entry point: `node dist/server.js [etcd flags]`.
 * The node (raft loop, WAL, MVCC, gRPC services) is wired in src/server/; until that lands this
 * entry point says so plainly instead of pretending to serve.
 */
process.stderr.write("etcetera: the server is not assembled yet (see issue: The etcd server)\n");
process.exit(1);
