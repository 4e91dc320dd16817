import { EventEmitter } from 'node:events';

// Types of the `repute` package (kept by hand beside index.js, which is the
// API users see; the native addon behind it is an implementation detail).
//
// Units: durations and instants are milliseconds (numbers). Instants are on
// the pool's clock, whose reading is `pool.now()`; beside each instant a view
// or event shows, a `*UnixMs` field gives its Unix time in ms (as
// `Date.now()`), mapped when the view was made. Lease ids and fencing
// tokens are `bigint`: they are unsigned 64-bit counters and compared exactly.

/// <reference lib="esnext.disposable" />

export type Store = 'memory' | `sqlite:${string}` | `postgres://${string}` | `postgresql://${string}` | `redis://${string}`;
/** How processes share a tenant on PostgreSQL; ignored by the other stores. */
export type Mode = 'sharded' | 'shared';
export type Strategy = 'classic' | 'thompson' | 'first';
export type FailureKind =
  | 'connection_reset'
  | 'tls_handshake'
  | 'timeout'
  | 'blocked'
  | 'slow'
  | 'rate_limited'
  | 'quota_exhausted'
  | 'auth_failed';
export type LeaseKind = 'client' | 'trial' | 'probe' | 'fail_open';
/** How a cell whose cooldown ended comes back: one client trial (`traffic`), a probe, or the reputation-pool 0.5.0 split. */
export type Recovery = 'traffic' | 'probe' | 'classic';
export type CellState = 'healthy' | 'cooling' | 'recovering' | 'blocklisted';

export interface PoolOptions {
  /**
   * `'memory'` (default); `'sqlite:PATH'`: durable checkpoints, report log and fence counters in a
   * file; or a `postgres://` URL: the same in a database that many processes share (see `mode`).
   */
  store?: Store;
  /**
   * With PostgreSQL: `'sharded'` (default), one pool owns the tenant at a time and the others get
   * `NotOwnerError`; or `'shared'`, every pool serves the tenant, the database grants the leases,
   * and `sync()` folds in what the others logged.
   */
  mode?: Mode;
  /** Sharded mode: the owner lease, renewed in the background; default 10000. */
  ownerTtlMs?: number;
  /** Sharded mode: where owner leases live, `'store'` (default) or `'etcd://HOST:PORT[,HOST:PORT]'`. */
  owners?: string;
  /** The tenant served; with SQLite, or PostgreSQL in sharded mode, one pool owns it at a time. Default `'default'`. */
  tenant?: string;
  /** Lease time to live; default 30000. */
  leaseTtlMs?: number;
  /** Probe lease time to live; default 15000. */
  probeTtlMs?: number;
  /** Candidate selection; default `'thompson'`. */
  strategy?: Strategy;
  /** Seeds selection randomness of a fresh pool; default 0. */
  seed?: number | bigint;
  /** Time source; the process's monotonic clock by default. */
  clock?: ManualClock;
  /** Budget: most resources registered at once. */
  maxResources?: number;
  /** Budget: most reputation cells kept at once. */
  maxCells?: number;
  /** Token bucket on acquire: `rate` per second, at most `burst` stored. */
  rateLimit?: { rate: number; burst: number };
  /** Subtracted from the TTL for a lease's local deadline (`Lease.valid`); default a tenth of the TTL. */
  renewMarginMs?: number;
  /** How cooled cells come back; default `'traffic'` (no probe loop needed). */
  recovery?: Recovery;
  /** Grant the candidate whose cooldown ends soonest rather than nothing (never a blocked one); default false. */
  failOpen?: boolean;
  /**
   * With `recovery: 'probe'`: the pool runs the probe loop, calling this for every cell due
   * (true/undefined healthy, false failed, a number an HTTP status; a throw is a failure).
   */
  probe?: (target: ProbeTarget) => ProbeAnswer | Promise<ProbeAnswer>;
  /** Probes in flight at once; default 4. */
  probeConcurrency?: number;
  /** Time between probe rounds; default 1000. */
  probeEveryMs?: number;
  /** Per failure kind, the cooling rule to use instead of the default; unset fields keep theirs. */
  cooldowns?: Partial<Record<Exclude<FailureKind, 'auth_failed'>, CooldownRule>>;
  /**
   * Per kind, how its resources' answers are read by `reportHttp`; a kind not named has the
   * profile its name names (`proxy`, `openai`, ...), else `generic`.
   */
  profiles?: Record<string, Profile>;
}

/** How a kind's answers are read: a proxy's 403 cools it for that site only, an API key's 401 blocks it everywhere. */
export type Profile = 'generic' | 'proxy' | 'api-key' | 'openai' | 'anthropic' | 'gemini';

export type ProbeAnswer = boolean | number | undefined;

export interface CooldownRule {
  /** Base cooldown (for `rate_limited` / `quota_exhausted`: the wait when the provider gave none). */
  baseMs?: number;
  /** Consecutive failures that cool a cell. */
  coolAfter?: number;
  /** Cap on the doubling of the cooldown, 0..=21. */
  maxExponent?: number;
}

export interface HoldOptions {
  /** Renewed by the pool (at a third of its TTL) until released or lost; default false. */
  autoRenew?: boolean;
  /** With `autoRenew`: the lease ends (lost as `max_hold`, its permit released) this long after the grant. */
  maxHoldMs?: number;
}

/** Which resources an acquire may choose, and which it tries first; every part optional. */
export interface SelectorOptions {
  /** Only resources of this kind. */
  kind?: string;
  /** Only resources whose labels match every entry: label name → the value, or any of the values (1..=16), it must have. */
  where?: Record<string, string | readonly string[]>;
  /** Never resources with these values, of any kind (at most 64). */
  exclude?: readonly string[];
  /** Try the resource with this value first (of `kind` when given), if it is selectable and admitted. */
  prefer?: string;
  /**
   * Try the resource the last lease with this key got first, if it is still selectable and
   * admitted; the grant binds the key to its resource (a blocked one is replaced).
   */
  affinity?: string;
  /**
   * Tokens the grant reserves against a resource's `tpm`, > 0; default 1. Only resources whose
   * `tpm` is at least this are chosen; `lease.reconcile(used)` corrects it to the use.
   */
  cost?: number | bigint;
}

export interface AcquireOptions extends HoldOptions, SelectorOptions {
  /** How long to wait for a resource; default without limit (as in Python). 0 tries once. */
  timeoutMs?: number;
  /** Aborts the wait (rejects with the signal's reason). */
  signal?: AbortSignal;
}

/** Why a lease was lost. */
export type Loss = 'expired' | 'renewal_refused' | 'blocked' | 'owner_lost' | 'max_hold' | 'closed';

export interface ReportOptions {
  /** Observed latency; default 0. */
  latencyMs?: number;
}

export interface UsageOptions {
  /** The tokens the use took, reconciled (as `lease.reconcile`) before the report. */
  usage?: number | bigint;
}

export interface FailureOptions extends ReportOptions {
  /** With `rate_limited` or `quota_exhausted`: the wait the provider asked for. */
  retryAfterMs?: number;
}

/** Response headers: a fetch `Headers`, a `Map`, a plain object or `[name, value]` pairs. */
export type HeadersLike = Headers | Map<string, string> | Record<string, string> | Iterable<[string, string]>;

export interface HttpReportOptions extends ReportOptions {
  /** The response's headers; waits (`Retry-After`, `retry-after-ms`, rate-limit resets) are read. */
  headers?: HeadersLike;
  /** The response's body; an error's code, type and stated delay are read (at most 64 KiB). */
  body?: string | Uint8Array;
}

export interface BlockOptions {
  /** Block only in this context; resource-wide when absent. */
  context?: string;
  /** Lift the block after this long; until `unblock` when absent. */
  durationMs?: number;
  reason?: string;
}

export interface BlockInfo {
  untilMs?: number;
  untilUnixMs?: number;
  reason?: string;
}

export interface LeaseData {
  id: bigint;
  token: bigint;
  kind: string;
  value: string;
  context: string;
  permit: number;
  leaseKind: LeaseKind;
  grantedAtMs: number;
  grantedAtUnixMs: number;
  expiresAtMs: number;
  expiresAtUnixMs: number;
  ttlMs: number;
  /** Set for leases granted to this holder: see `Lease.valid`. */
  deadlineMs?: number;
}

export interface CellInfo {
  /** Absent for the global layer. */
  context?: string;
  state: CellState;
  score: number;
  effectiveScore: number;
  consecutiveFailures: number;
  consecutiveSuccesses: number;
  coolingUntilMs?: number;
  coolingUntilUnixMs?: number;
  cause?: FailureKind;
  halfOpen: boolean;
  dueForProbe: boolean;
  successRate?: number;
  latencyMs: number;
  observations: number;
  block?: BlockInfo;
}

/** Why its usage limits retired a resource. */
export type RetireReason = 'max_uses' | 'max_age';

/** A resource's usage limits, as its view shows them: the ones it has. */
export interface Limits {
  /** At most this many grants in any 60 s, 1..=100000. */
  rpm?: number;
  /** At most this many tokens (each lease's `cost`, reconciled to its use) in any 60 s. */
  tpm?: number;
  /** At most this many grants in any rolling day, 1..=100000000. */
  rpd?: number;
  /** At most this many tokens in any rolling day. */
  tpd?: number;
  /** At least this long between two grants. */
  minIntervalMs?: number;
  /** At most this many grants ever; then the resource is retired. */
  maxUses?: number;
  /** Retired this long after it was registered. */
  maxAgeMs?: number;
  /** Limits each context of the resource has on its own, beside these (a provider's quota per model). */
  perContext?: ContextLimits;
}

/** A resource's limits in each one context: a grant for a context counts against the resource's and its context's. */
export interface ContextLimits {
  /** At most this many grants for one context in any 60 s, 1..=100000. */
  rpm?: number;
  /** At most this many tokens for one context in any 60 s. */
  tpm?: number;
  /** At least this long between two grants for one context. */
  minIntervalMs?: number;
}

/** `register`'s `limits`: a view's `limits` registers them again; counts may be bigints. */
export interface LimitsOptions extends Omit<Limits, 'tpm' | 'tpd' | 'maxUses' | 'perContext'> {
  tpm?: number | bigint;
  tpd?: number | bigint;
  maxUses?: number | bigint;
  perContext?: Omit<ContextLimits, 'tpm'> & { tpm?: number | bigint };
}

export interface RegisterOptions {
  /** Concurrent leases, 1..=1024; default 1. */
  permits?: number;
  /** Usage limits; none when absent. A bad one throws InvalidInputError naming `limits.rpm`, ... */
  limits?: LimitsOptions;
  /** At most 16, for acquire's `where`: a name of 1..=64 ASCII letters, digits, `_`, `-`, `.`. */
  labels?: Record<string, string>;
  /** Handed to the holders of the resource's leases (`lease.secret`), shown nowhere else; 1..=4096 bytes. */
  secret?: string;
  /** The quota groups it belongs to (see `setGroup`): at most 8 names, each once. */
  groups?: string[];
}

/** What a quota group's members may use together, as its view shows them. */
export interface GroupLimits {
  /** At most this many grants of its members in any 60 s, 1..=100000. */
  rpm?: number;
  /** At most this many tokens of its members in any 60 s. */
  tpm?: number;
  /** At most this many grants of its members in any rolling day, 1..=100000000. */
  rpd?: number;
  /** At most this many tokens of its members in any rolling day. */
  tpd?: number;
  /** At most this many live leases across its members, 1..=1000000. */
  concurrency?: number;
  /** A `quota_exhausted` failure on one member pauses every member. */
  sharedQuota: boolean;
}

/** `setGroup`'s limits: a view's `limits` sets them again; counts may be bigints. A bad one throws InvalidInputError naming `group.rpm`, ... */
export interface GroupLimitsOptions extends Omit<GroupLimits, 'tpm' | 'tpd' | 'sharedQuota'> {
  tpm?: number | bigint;
  tpd?: number | bigint;
  sharedQuota?: boolean;
}

/** What a window holds: grants and the tokens they count. */
export interface WindowUsage {
  grants: number;
  tokens: number;
}

export interface GroupInfo {
  name: string;
  limits: GroupLimits;
  /** Registered members. */
  members: number;
  /** Live leases of its members. */
  leased: number;
  /** What its members' grants hold of the current 60 s window. */
  usage: WindowUsage;
  /** What they hold of the current rolling day. */
  dayUsage: WindowUsage;
  /** No member is selected before this (a full window, or a shared quota's pause); absent when none holds them back. */
  limitedUntilMs?: number;
  limitedUntilUnixMs?: number;
}

export interface ResourceInfo {
  kind: string;
  value: string;
  permits: number;
  /** By name; a resource's secret is never part of its view. */
  labels: Record<string, string>;
  limits: Limits;
  /** Grants since it was registered, as its limits count them (`rpm`, `tpm`, `minIntervalMs` and `maxUses` do; without them 0). */
  uses: number;
  /** Set once its limits retired it; it is not selected again. */
  retired?: RetireReason;
  leased: number;
  score: number;
  contexts: number;
  block?: BlockInfo;
  /** The quota groups it belongs to, as registered. */
  groups: string[];
}

export interface Stats {
  resources: number;
  cells: number;
  contexts: number;
  liveLeases: number;
  available: number;
  dueForProbe: number;
  nowMs: number;
  /** Log entries the pool folded or wrote that did not apply: refused alike by every process. */
  refusedEntries: number;
}

export interface ProbeTarget {
  kind: string;
  value: string;
  context: string;
}

export type EventType =
  | 'registered'
  | 'unregistered'
  | 'cooled'
  | 'recovered'
  | 'blocklisted'
  | 'unblocked'
  | 'leased'
  | 'renewed'
  | 'released'
  | 'lease_expired'
  | 'revoked'
  | 'rejected'
  | 'retired';

/** One pool event; only the fields the event carries are set. */
export interface PoolEvent {
  type: EventType;
  atMs: number;
  atUnixMs: number;
  /** The resource concerned. */
  kind?: string;
  value?: string;
  context?: string;
  /** `registered`. */
  permits?: number;
  /** `cooled`, `blocklisted` (absent: until lifted). */
  untilMs?: number;
  untilUnixMs?: number;
  /** `cooled`. */
  cause?: FailureKind;
  /** `blocklisted`: the block's reason; `rejected`: `no_candidates` or `rate_limited`; `retired`: a `RetireReason`. */
  reason?: string;
  /** Lease events. */
  lease?: LeaseData;
}

/** A clock that moves only when told to, for tests: `new Pool({ clock })`. */
export class ManualClock {
  constructor(startMs?: number);
  advance(ms: number): void;
  /** Ignored if below the current reading (monotonic). */
  set(ms: number): void;
  now(): number;
}

/**
 * An exclusive, fenced hold on one permit of one resource. Emits `'lost'`
 * once (with the `Loss`) when the lease is lost; listening keeps the
 * process alive until the lease is released or lost.
 */
export class Lease extends EventEmitter implements Disposable, AsyncDisposable {
  private constructor();
  readonly id: bigint;
  /** Fencing token: strictly increasing per resource permit, across restarts of a durable store. */
  readonly token: bigint;
  readonly kind: string;
  readonly value: string;
  readonly context: string;
  readonly permit: number;
  readonly leaseKind: LeaseKind;
  /** The secret the resource was registered with, or null (read from the pool once). */
  readonly secret: string | null;
  readonly ttlMs: number;
  readonly grantedAtMs: number;
  readonly expiresAtMs: number;
  /** When the holder must stop relying on the lease (I7), on the pool's clock. */
  readonly deadlineMs: number;
  readonly expiresInMs: number;
  /** False once released or lost (a renewal failed, send time + TTL - margin passed, ...). */
  readonly valid: boolean;
  readonly released: boolean;
  readonly lost: boolean;
  readonly loss: Loss | null;
  renew(): Promise<this>;
  /**
   * Frees the permit: in this pool at once, for other processes once the
   * promise resolves (on Redis, when the revoke has run). Resolves to true
   * if the lease was held up to now, false if it had been lost (its grant is
   * still revoked at the authority, conditionally on its token). Idempotent.
   * An unreachable store rejects the promise (the permit then lapses at its TTL).
   */
  release(): Promise<boolean>;
  on(event: 'lost', listener: (loss: Loss) => void): this;
  once(event: 'lost', listener: (loss: Loss) => void): this;
  off(event: 'lost', listener: (loss: Loss) => void): this;
  /** The lease used `used` tokens of its resource's `tpm` instead of its `cost`; the window counts `used` from now on. */
  reconcile(used: number | bigint): Promise<void>;
  reportSuccess(options?: ReportOptions & UsageOptions): Promise<void>;
  reportFailure(failure: FailureKind, options?: FailureOptions & UsageOptions): Promise<void>;
  /** Reports the use by the upstream's HTTP answer (429 + Retry-After, 401, ...), mapped as the README's table says. */
  reportHttp(status: number, options?: HttpReportOptions & UsageOptions): Promise<void>;
  [Symbol.dispose](): void;
  [Symbol.asyncDispose](): Promise<void>;
  toJSON(): Record<string, unknown>;
}

export class Pool implements Disposable {
  constructor(options?: PoolOptions);
  /** Like the constructor, with the store opened off the JS thread. */
  static open(options?: PoolOptions): Promise<Pool>;
  now(): number;
  /** Registers a resource, or replaces its permits, limits, labels, secret and groups; true if anything changed. */
  register(kind: string, value: string, options?: RegisterOptions): boolean;
  /** Sets (or, with none, removes) the limits a quota group's members share; true if anything changed. */
  setGroup(name: string, limits?: GroupLimitsOptions): boolean;
  /** Every quota group with members or limits, sorted by name. */
  groups(): GroupInfo[];
  unregister(kind: string, value: string, options?: { force?: boolean }): void;
  /**
   * The best lease for `context` now, or null. Synchronous: on SQLite it
   * writes the new token in a local transaction; on PostgreSQL or Redis it
   * waits for the store's round trip on the JS thread, where `acquire()`
   * waits off it.
   */
  tryAcquire(context: string, options?: HoldOptions & SelectorOptions): Lease | null;
  acquire(context: string, options?: AcquireOptions): Promise<Lease>;
  /**
   * Acquires, runs `fn(lease, signal)` and releases. `signal` aborts (with a
   * LeaseExpiredError naming the loss) when the lease is lost; a lease lost
   * while `fn` ran makes a normal return reject with LeaseExpiredError.
   */
  withLease<T>(
    context: string,
    fn: (lease: Lease, signal: AbortSignal) => T | Promise<T>,
    options?: AcquireOptions,
  ): Promise<T>;
  acquireForProbe(kind: string, value: string, context: string): Lease;
  /** A handle on a live lease from its id and token (renews it under that token). */
  resume(id: bigint | number, token: bigint | number): Lease;
  reportSuccess(kind: string, value: string, context: string, options?: ReportOptions): Promise<void>;
  reportFailure(kind: string, value: string, context: string, failure: FailureKind, options?: FailureOptions): Promise<void>;
  reportHttp(kind: string, value: string, context: string, status: number, options?: HttpReportOptions): Promise<void>;
  block(kind: string, value: string, options?: BlockOptions): void;
  unblock(kind: string, value: string, options?: { context?: string }): boolean;
  dueForProbe(): ProbeTarget[];
  cells(kind: string, value: string): CellInfo[];
  resources(): ResourceInfo[];
  leases(): LeaseData[];
  stats(): Stats;
  snapshot(options?: { withLeases?: boolean }): Buffer;
  restore(bytes: Uint8Array): void;
  snapshotJson(options?: { withLeases?: boolean }): unknown;
  restoreJson(state: unknown): void;
  checkpoint(options?: { withLeases?: boolean }): Promise<number>;
  /** Folds in what other pools logged (shared mode on PostgreSQL); returns how many entries. */
  sync(): number;
  /** `sync()` off the JS thread. */
  syncAsync(): Promise<number>;
  drainEvents(): PoolEvent[];
  events(): AsyncIterableIterator<PoolEvent>;
  /** A durable store first saves a checkpoint unless `checkpoint: false` (never in shared mode). */
  close(options?: { checkpoint?: boolean }): void;
  [Symbol.dispose](): void;
}

/**
 * The partition, of `partitions` (1 to 64), that holds `context` on a server of
 * `--mode partitioned`: send its requests to that partition's owner (`GET /v1/partitions`).
 */
export function partitionOf(context: string, partitions: number): number;
/** The partition, of `partitions` (1 to 64), whose owner granted the lease `leaseId`. */
export function leasePartition(leaseId: bigint | number, partitions: number): number;

export * from './errors';
export * from './adapters';
