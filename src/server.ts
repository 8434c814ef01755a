/** Entry point: `node dist/server.js [etcd flags]` (see src/server/main.ts), or `snapshot status|restore` (src/snapshot_cli.ts). */
import { main } from "./server/main.js";
import { snapshotMain } from "./snapshot_cli.js";
import { FRONT_END_ENV, frontEndMain } from "./server/front_end/front_end.js";

const argv = process.argv.slice(2);
const frontEnd = process.env[FRONT_END_ENV];
if (frontEnd !== undefined) {
  // A front-end process forked by a member's core (--experimental-front-ends): same command line, other role.
  frontEndMain(Number(frontEnd), argv).catch((err: unknown) => {
    process.stderr.write(`front end ${frontEnd} failed to start: ${String(err)}\n`);
    process.exit(1);
  });
} else if (argv[0] === "snapshot") {
  void snapshotMain(argv.slice(1), { stdout: (t) => process.stdout.write(t), stderr: (t) => process.stderr.write(t) }).then((code) => {
    process.exitCode = code;
  });
} else {
  void main(argv);
}
