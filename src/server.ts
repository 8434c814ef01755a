/** Entry point: `node dist/server.js [etcd flags]` (see src/server/main.ts), or `snapshot status|restore` (src/snapshot_cli.ts). */
import { main } from "./server/main.js";
import { snapshotMain } from "./snapshot_cli.js";

const argv = process.argv.slice(2);
if (argv[0] === "snapshot") {
  void snapshotMain(argv.slice(1), { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t) }).then((code) => {
    process.exitCode = code;
  });
} else {
  void main(argv);
}
