/**
 * The users the auth e2e suites start from: root (password rootpw, the root role) and u1 (password
 * u1pw, role r1: readwrite on the prefix app/), then auth enabled, as etcdctl commands.
 */

/** The etcdctl commands, in order; the last is `auth enable` (it prints "Authentication Enabled"). */
export const ROOT_AND_U1 = [
  ["user", "add", "root:rootpw"],
  ["role", "add", "root"],
  ["user", "grant-role", "root", "root"],
  ["user", "add", "u1:u1pw"],
  ["role", "add", "r1"],
  ["role", "grant-permission", "r1", "readwrite", "app/", "--prefix"],
  ["user", "grant-role", "u1", "r1"],
  ["auth", "enable"],
] as const;

/** Runs ROOT_AND_U1 through `run` (an etcdctl that throws on failure); returns auth enable's output. */
export async function enableAuthWithRootAndU1(run: (...args: string[]) => Promise<string>): Promise<string> {
  let out = "";
  for (const args of ROOT_AND_U1) out = await run(...args);
  return out;
}
