/**
 * A V3Api over real stores (memberStores) with every collaborator outside the stores a stub that
 * rejects ("not used"), for tests that give only the parts they exercise.
 */
import { PasswordHasher } from "../../src/auth/password.js";
import { V3Api, type V3ApiOptions } from "../../src/server/v3_api.js";
import { memberStores } from "./stores.js";

const notUsed = async (): Promise<never> => Promise.reject(new Error("not used"));

export function v3ApiWith(overrides: Partial<V3ApiOptions>): { api: V3Api; stores: ReturnType<typeof memberStores> } {
  const stores = memberStores();
  const { backend, lessor, kv, watchable, alarms, auth, tokens, membership } = stores;
  const api = new V3Api({
    memberId: 1n,
    clusterId: 2n,
    requestTimeoutMs: 7000,
    limits: { maxTxnOps: 128, maxRequestBytes: 1 << 20, quotaBackendBytes: null, electionMs: 1000 },
    raft: { leader: () => 1n, isLeader: () => true, raftTerm: () => 3, committed: () => 0, applied: () => 0, isLearner: () => false, moveLeader: async () => {} },
    propose: notUsed,
    readIndex: { notify: async () => {} },
    kv,
    watchable,
    lessor,
    alarms,
    membership,
    auth,
    tokens,
    passwords: new PasswordHasher({ cost: 4 }),
    backend,
    snapshots: { client: notUsed },
    leaderClient: { keepAlive: notUsed, timeToLive: notUsed },
    reconfigure: { addMember: notUsed, removeMember: notUsed, updateMember: notUsed, promoteMember: notUsed },
    defragment: notUsed,
    expensive: { rangeServed: () => {}, readOnlyTxnServed: () => {} },
    ...overrides,
  });
  return { api, stores };
}
