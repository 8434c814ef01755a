/**
 * --cors as etcd 3.4 reads it (flags.NewUniqueURLsWithExceptions("*")): empty or "*" allows every
 * origin; otherwise each comma-separated item is "*" or an origin URL with scheme and host:port,
 * checked as etcd checks URLs, so `--cors=http://a.example` is refused as etcd refuses it.
 */
import { ConfigError, parseUrlList } from "./flags.js";

export function checkCorsFlag(value: string): string {
  if (value === "" || value === "*") return value;
  for (const item of value.split(",")) {
    if (item.trim() === "*") continue;
    try {
      parseUrlList(item);
    } catch (e) {
      throw new ConfigError(`invalid value "${value}" for flag -cors: ${(e as Error).message}`, 2);
    }
  }
  return value;
}
