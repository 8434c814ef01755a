/**
 * Cluster alarms (etcd's alarm.AlarmStore): NOSPACE and CORRUPT raised per member, replicated
 * through Raft, persisted in the backend's `alarms` table. While NOSPACE is active the cluster
 * accepts only reads, deletes, compaction and alarm disarm. A snapshot restore reloads them from
 * the new file (etcd's restoreAlarms).
 */

export const ALARMS_SCHEMA =
  "CREATE TABLE IF NOT EXISTS alarms (member_id INTEGER NOT NULL, alarm INTEGER NOT NULL, PRIMARY KEY (member_id, alarm)) WITHOUT ROWID";
import type { Backend } from "../backend/backend.js";
import { compareNodeIds, type NodeId } from "../raft/types.js";
import { idFromSqlite, idToSqlite } from "./member.js";
import type { BatchTx, WriteStatement } from "../backend/batch_tx.js";

export enum AlarmType {
  NONE = 0,
  NOSPACE = 1,
  CORRUPT = 2,
}

export enum AlarmAction {
  GET = 0,
  ACTIVATE = 1,
  DEACTIVATE = 2,
}

export interface AlarmMember {
  memberID: NodeId;
  alarm: AlarmType;
}

export class Alarms {
  private readonly active = new Map<string, AlarmMember>();
  private insertStmt!: WriteStatement<[bigint, AlarmType]>;
  private deleteStmt!: WriteStatement<[bigint, AlarmType]>;

  constructor(backend: Backend) {
    backend.register({ name: "alarms", schema: ALARMS_SCHEMA, recover: (tx) => this.recover(tx) });
  }

  private recover(tx: BatchTx): void {
    this.insertStmt = tx.write("INSERT OR IGNORE INTO alarms (member_id, alarm) VALUES (?, ?)");
    this.deleteStmt = tx.write("DELETE FROM alarms WHERE member_id = ? AND alarm = ?");
    this.active.clear();
    for (const row of tx.read<[], { member_id: string; alarm: number }>("SELECT CAST(member_id AS TEXT) AS member_id, alarm FROM alarms").all()) {
      const memberID = idFromSqlite(row.member_id);
      this.active.set(keyOf(memberID, row.alarm), { memberID, alarm: row.alarm });
    }
  }

  /** Returns the alarm when it was newly raised. */
  activate(memberID: NodeId, alarm: AlarmType): AlarmMember | undefined {
    const k = keyOf(memberID, alarm);
    if (this.active.has(k)) return undefined;
    const a = { memberID, alarm };
    this.active.set(k, a);
    this.insertStmt.run(idToSqlite(memberID), alarm);
    return a;
  }

  /** Returns the alarm when it was active. */
  deactivate(memberID: NodeId, alarm: AlarmType): AlarmMember | undefined {
    const k = keyOf(memberID, alarm);
    const a = this.active.get(k);
    if (a === undefined) return undefined;
    this.active.delete(k);
    this.deleteStmt.run(idToSqlite(memberID), alarm);
    return a;
  }

  /** Active alarms of `type` (NONE: all), ordered by member then type. */
  list(type: AlarmType = AlarmType.NONE): AlarmMember[] {
    return [...this.active.values()]
      .filter((a) => type === AlarmType.NONE || a.alarm === type)
      .sort((x, y) => compareNodeIds(x.memberID, y.memberID) || x.alarm - y.alarm);
  }

  has(type: AlarmType): boolean {
    for (const a of this.active.values()) if (a.alarm === type) return true;
    return false;
  }
}

function keyOf(memberID: NodeId, alarm: number): string {
  return `${memberID}/${alarm}`;
}
