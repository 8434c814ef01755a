/**
 * A member's on/off knob from the environment: 1, empty or unset is on, 0 is off, and anything
 * else is an error text naming the variable (refused at start: fail closed, never guessed).
 */
export function envSwitch(env: NodeJS.ProcessEnv, name: string): boolean | { error: string } {
  const raw = env[name];
  if (raw === undefined || raw === "" || raw === "1") return true;
  if (raw === "0") return false;
  return { error: `${name} must be 0 or 1, got ${JSON.stringify(raw)}` };
}
