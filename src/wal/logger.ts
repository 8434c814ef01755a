/** The slice of pino's API the WAL uses, so callers pass a pino logger and tests a recorder. */
export interface WalLogger {
  info(obj: Record<string, unknown>, msg: string): void;
  warn(obj: Record<string, unknown>, msg: string): void;
  error(obj: Record<string, unknown>, msg: string): void;
}

export const silentLogger: WalLogger = {
  info: () => {},
  warn: () => {},
  error: () => {},
};
