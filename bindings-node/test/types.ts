// Type-checked (never run) by `tsc --noEmit -p test/tsconfig.json`: the
// shipped index.d.ts describes the API as the tests use it.
import {
  Pool,
  ManualClock,
  Lease,
  Loss,
  NoResourceAvailableError,
  InvalidInputError,
  ReputeError,
  StaleLeaseError,
  StoreError,
  PoolClosedError,
  InternalError,
  partitionOf,
  leasePartition,
  type CellInfo,
  type GroupInfo,
  type GroupLimits,
  type Limits,
  type PoolEvent,
  type RetireReason,
  type Stats,
} from 'repute';

export async function tour(): Promise<number> {
  const clock = new ManualClock();
  const pool = new Pool({ clock, store: 'memory', tenant: 't', leaseTtlMs: 1_000, strategy: 'first', seed: 1n });
  const changed: boolean = pool.register('proxy', 'a', { permits: 2 });
  const partition: number = partitionOf('example.com', 3) + leasePartition(1n, 3) + leasePartition(1, 3);
  if (partition < 0) throw new RangeError('no partition');
  const maybe: Lease | null = pool.tryAcquire('example.com');
  if (maybe !== null) {
    const token: bigint = maybe.token;
    const valid: boolean = maybe.valid;
    await maybe.reportFailure('timeout', { latencyMs: 3 });
    maybe.release();
    void token, valid;
  }
  {
    await using lease = await pool.acquire('example.com', { timeoutMs: 10 });
    await lease.renew();
    await lease.reportSuccess({ latencyMs: 5 });
  }
  {
    using lease = pool.tryAcquire('example.com') ?? undefined;
    void lease?.expiresInMs;
  }
  pool.register('api-key', 'k1', { labels: { tier: 'paid' }, secret: 'sk-1' });
  const keyed: Lease = await pool.acquire('gpt-4o', {
    kind: 'api-key',
    where: { tier: ['paid', 'free'], region: 'eu' },
    exclude: ['k0'],
    prefer: 'k1',
    affinity: 'user-1',
    timeoutMs: 100,
  });
  const secret: string | null = keyed.secret;
  const labels: Record<string, string> = pool.resources()[0].labels;
  void pool.tryAcquire('gpt-4o', { kind: 'api-key', autoRenew: true });
  // @ts-expect-error: a label's value is a string
  pool.register('api-key', 'k2', { labels: { tier: 1 } });
  // @ts-expect-error: where maps a label name to a string or strings
  void pool.tryAcquire('gpt-4o', { where: { tier: 1 } });
  void secret, labels;
  pool.register('api-key', 'k3', {
    limits: { rpm: 60, tpm: 90_000n, minIntervalMs: 500, maxUses: 1_000, maxAgeMs: 3_600_000 },
  });
  const metered: Lease = await pool.acquire('gpt-4o', { kind: 'api-key', cost: 500, timeoutMs: 100 });
  await metered.reconcile(420);
  await metered.reportHttp(200, { latencyMs: 200, usage: 430n });
  await metered.reportSuccess({ usage: 1 });
  const view = pool.resources()[0];
  const limits: Limits = view.limits;
  const rpm: number | undefined = limits.rpm;
  const retired: RetireReason | undefined = view.retired;
  const uses: number = view.uses;
  pool.register('api-key', 'k3', { limits });
  // @ts-expect-error: durations are ms, named so
  pool.register('api-key', 'k4', { limits: { minInterval: 500 } });
  // @ts-expect-error: a cost is a count
  void pool.tryAcquire('gpt-4o', { cost: '500' });
  void rpm, retired, uses;
  pool.register('api-key', 'k5', { groups: ['project:acme'], limits: { rpd: 1_000, tpd: 5_000_000n } });
  const groupChanged: boolean = pool.setGroup('project:acme', { rpm: 60, tpd: 10n ** 9n, concurrency: 4, sharedQuota: true });
  const group: GroupInfo = pool.groups()[0];
  const groupLimits: GroupLimits = group.limits;
  const dayGrants: number = group.dayUsage.grants;
  const limitedUntil: number | undefined = group.limitedUntilUnixMs;
  const memberOf: string[] = pool.resources()[0].groups;
  pool.setGroup(group.name, groupLimits);
  pool.setGroup('project:acme');
  // @ts-expect-error: groups are a list of names
  pool.register('api-key', 'k6', { groups: 'project:acme' });
  // @ts-expect-error: sharedQuota is a boolean
  pool.setGroup('project:acme', { sharedQuota: 'yes' });
  void groupChanged, dayGrants, limitedUntil, memberOf;
  const permit: number = await pool.withLease('example.com', async (lease) => lease.permit);
  const held: boolean = await pool.withLease(
    'example.com',
    async (lease, signal: AbortSignal) => {
      lease.on('lost', (loss: Loss) => void loss);
      const why: Loss | null = lease.loss;
      void why, signal.aborted;
      return lease.release();
    },
    { autoRenew: true, maxHoldMs: 60_000 },
  );
  void held;
  try {
    await pool.acquire('nowhere', { timeoutMs: 0, signal: AbortSignal.timeout(5) });
  } catch (e) {
    if (e instanceof NoResourceAvailableError) {
      const after: number | null = e.retryAfterMs;
      const limited: number = e.limited;
      void after, limited;
    } else if (e instanceof InvalidInputError) {
      const where: string = `${e.field}: ${e.rule}`;
      void where;
    } else if (e instanceof StaleLeaseError) {
      const code: 'stale_lease' = e.code;
      void code;
    } else if (e instanceof StoreError) {
      const versions: [number | null, number | null] = [e.expected, e.found];
      void versions;
    } else if (e instanceof PoolClosedError || e instanceof InternalError) {
      const code: 'closed' | 'trap' | 'runtime' = e.code;
      void code;
    } else if (e instanceof ReputeError) {
      const code: string = e.code;
      void code;
    }
  }
  for await (const event of pool.events()) {
    const type: PoolEvent['type'] = event.type;
    const when: [number, number] = [event.atMs, event.atUnixMs];
    void type, when;
    break;
  }
  const cells: CellInfo[] = pool.cells('proxy', 'a');
  const stats: Stats = pool.stats();
  const bytes: Buffer = pool.snapshot();
  pool.restore(bytes);
  await pool.reportFailure('proxy', 'a', 'example.com', 'slow', { latencyMs: 900 });
  // @ts-expect-error: not a failure kind
  await pool.reportFailure('proxy', 'a', 'example.com', 'gremlins');
  // @ts-expect-error: stores are 'memory', 'sqlite:PATH' or a postgres:// URL
  new Pool({ store: 'mysql://db' });
  // @ts-expect-error: modes are 'sharded' or 'shared'
  new Pool({ store: 'postgres://db', mode: 'solo' });
  const shared = await Pool.open({ store: 'postgresql://repute@db/repute', mode: 'shared', ownerTtlMs: 5_000 });
  const folded: number = shared.sync() + (await shared.syncAsync());
  // @ts-expect-error: leases only come from a pool
  new Lease();
  const version: number = await (await Pool.open({ store: 'sqlite:pool.db' })).checkpoint();
  pool.close();
  void changed, cells, stats;
  return permit + version + folded;
}
