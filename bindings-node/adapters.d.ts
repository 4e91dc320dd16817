// Types of the adapters (lib/attempts.js, lib/dispatcher.js, lib/clients.js,
// lib/got.js, lib/crawlee.js), which index.d.ts exports: one request carried
// by the pool's resources, as an undici Dispatcher or a `fetch`, and through
// axios's, got's and Crawlee's extension points (typed structurally: none of
// those packages is needed to compile against these).

import { Dispatcher } from 'undici';
import type { FailureKind, Lease, Pool, SelectorOptions } from './index';

/** What one request may use: the resources (`kind`, `where`, ...), how often and for how long. */
export interface AttemptsPlan extends SelectorOptions {
  /** Attempts at most, 1..=16; default 3 (the first, another resource after a resource's fault, a third to tell a request's own). */
  attempts?: number;
  /** For the whole request, waits for a resource included; default without limit. */
  timeoutMs?: number;
}

export interface AttemptsOptions extends AttemptsPlan {
  /** Where the request counts (a site, a model): see `contextOf`. */
  context: string;
}

/** How to send an attempt on the lease it began on. */
export type Route =
  /** Through the proxy whose URL is `proxy` (the lease's value). */
  | { via: 'proxy'; proxy: string }
  /** Straight to the target with header `name` set to `value` (the key's credential), replacing the request's. */
  | { via: 'header'; name: string; value: string }
  /** Straight to the target as the request is. */
  | { via: 'as_is' };

/**
 * After an answer or a failure: `stream` (deliver; the lease is held until `finished`),
 * `deliver` (this answer or error is the request's result) or `retry` (acquire again).
 */
export type AttemptStep = 'stream' | 'deliver' | 'retry';

/**
 * One request's attempts, by the host's attempt protocol: `acquire`, `begin`, send along the
 * route, then `answered` or `failed`; `finished` once a streamed body ends; `end` however the
 * request ends (a lease acquired and not begun is the caller's to release).
 */
export class Attempts {
  constructor(pool: Pool, options: AttemptsOptions);
  readonly context: string;
  /** Attempts begun so far. */
  readonly made: number;
  /**
   * The next attempt's lease, waiting as `Pool.acquire` does within the request's time, on the
   * caller's selector without the resources tried; rejects with the refusal when it gives up.
   */
  acquire(options?: { signal?: AbortSignal }): Promise<Lease>;
  begin(lease: Lease): Route;
  /** The answer: for an error status (>= 400) pass the whole body, which the profile reads. */
  answered(
    status: number,
    options?: { headers?: Iterable<readonly [string, string]> | Record<string, string>; body?: string | Uint8Array | null },
  ): AttemptStep;
  /** No answer: `connection_reset`, `timeout`, `tls_handshake`, ... */
  failed(kind: FailureKind): AttemptStep;
  /** The streamed body was read to its end or closed (no argument), or was cut by `broken`. */
  finished(broken?: FailureKind | null): void;
  /** Reports a result held back for a second opinion, releases a lease in flight; idempotent. */
  end(): void;
}

/**
 * The context a request to `url` counts in by default: for an API key of `kind` whose profile
 * reads models, the `model` of its JSON `body`; else the URL's host name.
 */
export function contextOf(pool: Pool, url: string | URL, options?: { kind?: string | null; body?: string | Uint8Array | null }): string;

export interface DispatcherOptions extends AttemptsPlan {
  /** Where each request counts: a string, or a function of the request's dispatch options; default `contextOf`. */
  context?: string | ((options: Dispatcher.DispatchOptions) => string);
  /** Proxy agents kept open at most (least recently used closed first); default 64. */
  maxProxies?: number;
}

/**
 * An undici Dispatcher that carries each request on the pool's resources: a proxy's through an
 * undici ProxyAgent for it, a key's with its credential header; a resource's fault moves the
 * request on, a fault that repeats on a second resource is delivered and blames neither, a
 * success streams with its lease held until its body ends.
 */
export class ReputeDispatcher extends Dispatcher {
  constructor(pool: Pool, options?: DispatcherOptions);
  /** Proxy agents open now. */
  readonly proxies: number;
}

/** `new ReputeDispatcher(pool, options)`. */
export function dispatcher(pool: Pool, options?: DispatcherOptions): ReputeDispatcher;

/** A `fetch` whose requests the pool carries; `dispatcher` is the ReputeDispatcher under it (close it when done). */
export interface ReputeFetch {
  (input: string | URL | Request, init?: RequestInit): Promise<Response>;
  readonly dispatcher: ReputeDispatcher;
}

/** undici's `fetch` on a ReputeDispatcher: for SDKs that take a `fetch` (the openai SDK's `fetch` option). */
export function fetch(pool: Pool, options?: DispatcherOptions): ReputeFetch;

/**
 * axios's configuration for its fetch adapter (axios >= 1.7) on repute's `fetch`:
 * `axios.create(axiosConfig(pool, { kind }))`; `env.fetch.dispatcher.close()` when done.
 */
export interface ReputeAxiosConfig {
  adapter: 'fetch';
  /** undici's Request and Response, the classes repute's `fetch` takes and gives. */
  env: {
    fetch: ReputeFetch;
    Request: new (input: string | URL | Request, init?: RequestInit) => Request;
    Response: new (body?: any, init?: ResponseInit) => Response;
  };
}

/** `{ adapter: 'fetch', env: { fetch: fetch(pool, options), Request, Response } }` (undici's classes). */
export function axiosConfig(pool: Pool, options?: DispatcherOptions): ReputeAxiosConfig;

export interface GotAdapterOptions extends AttemptsPlan {
  /** Where each request counts: a string, or a function of got's options; default `contextOf` the request. */
  context?: string | ((options: any) => string);
  /** Proxies whose http and https agents stay open at most (least recently used closed first); default 64. */
  maxProxies?: number;
}

/**
 * got's options for `got.extend`: hooks that carry each request on the pool (a proxy's through
 * an agent for it, a key's with its credential header), and `retry.calculateDelay`, which
 * retries when the protocol says so and never otherwise. Promise API only (a got stream fails
 * with InvalidInputError, field `isStream`). Abort with `signal`: got's `.cancel()` runs no hook,
 * so a cancelled attempt's lease is held until the garbage collector takes the request's attempts.
 */
export interface ReputeGotOptions {
  hooks: {
    beforeRequest: Array<(options: any) => Promise<any>>;
    afterResponse: Array<(response: any, retryWithMergedOptions: (options: any) => any) => any>;
    beforeError: Array<(error: any) => any>;
  };
  retry: { calculateDelay: (retry: any) => number };
  /** Closes the proxies' agents (not enumerable: got.extend takes the rest). */
  close(): void;
  /** Proxies with open agents now. */
  readonly proxies: number;
}

/** `got.extend(gotOptions(pool, { kind: 'proxy' }))`. */
export function gotOptions(pool: Pool, options?: GotAdapterOptions): ReputeGotOptions;

export interface CrawleeProxiesOptions extends AttemptsPlan {
  /** Where each request counts: a string, or a function of Crawlee's request; default its URL's host. */
  context?: string | ((request: { url: string; uniqueKey: string }) => string);
}

/** Crawlee's hooks as crawler options, to spread into an HttpCrawler's (or CheerioCrawler's) options. */
export interface CrawleeHooks {
  postNavigationHooks: Array<(context: any) => Promise<void>>;
  errorHandler: (context: any, error: Error) => Promise<void>;
  failedRequestHandler: (context: any, error: Error) => Promise<void>;
}

/**
 * A pool's proxies (`kind`, default `'proxy'`) as Crawlee's: `newUrlFunction` for its
 * `ProxyConfiguration` leases one per attempt of each request; `hooks` tell each attempt's
 * outcome and release it. A crawler with its own errorHandler or failedRequestHandler calls
 * these from them.
 */
export class CrawleeProxies {
  constructor(pool: Pool, options?: CrawleeProxiesOptions);
  newUrlFunction(sessionId: string | number | undefined, options?: { request?: { url: string; uniqueKey: string } }): Promise<string>;
  postNavigationHook(context: any): Promise<void>;
  errorHandler(context: any, error: Error): Promise<void>;
  failedRequestHandler(context: any, error: Error): Promise<void>;
  readonly hooks: CrawleeHooks;
  /** Requests begun and not yet ended. */
  readonly pending: number;
}

/** `new CrawleeProxies(pool, options)`. */
export function crawleeProxies(pool: Pool, options?: CrawleeProxiesOptions): CrawleeProxies;
