/** Entry point: `node dist/server.js [etcd flags]` (see src/server/main.ts). */
import { main } from "./server/main.js";

void main(process.argv.slice(2));
