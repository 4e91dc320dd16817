// Type checks of the adapters' declarations (adapters.d.ts, through index.d.ts): compiled, never run.
import { request } from 'undici';
import OpenAI from 'openai';
import got from 'got';
import axios from 'axios';
import {
  Pool,
  Attempts,
  contextOf,
  dispatcher,
  fetch,
  axiosConfig,
  gotOptions,
  crawleeProxies,
  CrawleeProxies,
  ReputeDispatcher,
  type GotAdapterOptions,
  type ReputeAxiosConfig,
  type ReputeGotOptions,
  type AttemptStep,
  type DispatcherOptions,
  type ReputeFetch,
  type Route,
} from '../index.js';

async function adapters(pool: Pool): Promise<void> {
  const options: DispatcherOptions = { kind: 'proxy', where: { region: 'eu' }, attempts: 3, timeoutMs: 5_000, maxProxies: 8 };
  const carrier: ReputeDispatcher = dispatcher(pool, { ...options, context: (o) => String(o.origin) });
  const res = await request('http://example.com/', { dispatcher: carrier });
  const text: string = await res.body.text();
  const open: number = carrier.proxies;
  await carrier.close();

  const f: ReputeFetch = fetch(pool, { kind: 'openai', context: 'gpt-4o' });
  const answer: Response = await f('https://api.openai.com/v1/models', { method: 'GET' });
  const client = new OpenAI({ apiKey: 'unused', fetch: fetch(pool, { kind: 'openai' }) });
  const d: ReputeDispatcher = f.dispatcher;

  const attempts = new Attempts(pool, { context: contextOf(pool, 'https://example.com/a'), kind: 'proxy' });
  const lease = await attempts.acquire({ signal: AbortSignal.timeout(1_000) });
  const route: Route = attempts.begin(lease);
  if (route.via === 'proxy') {
    const proxy: string = route.proxy;
    void proxy;
  } else if (route.via === 'header') {
    const header: [string, string] = [route.name, route.value];
    void header;
  }
  const step: AttemptStep = attempts.answered(429, { headers: { 'retry-after': '1' }, body: 'slow down' });
  const next: AttemptStep = attempts.failed('connection_reset');
  attempts.finished();
  attempts.finished('timeout');
  attempts.end();
  const made: number = attempts.made;
  // @ts-expect-error: not a failure kind
  attempts.failed('gone');
  // @ts-expect-error: the context is required
  new Attempts(pool, { kind: 'proxy' });
  void [text, open, answer, client, d, step, next, made];
}

async function clients(pool: Pool): Promise<void> {
  const config: ReputeAxiosConfig = axiosConfig(pool, { kind: 'proxy', attempts: 2 });
  const ax = axios.create(config);
  const page: string = (await ax.get<string>('http://example.com/', { responseType: 'text' })).data;
  await config.env.fetch.dispatcher.close();

  const options: GotAdapterOptions = { kind: 'openai', context: (o) => String(o.url), maxProxies: 4, timeoutMs: 1_000 };
  const hooks: ReputeGotOptions = gotOptions(pool, options);
  const client = got.extend(hooks);
  const body: string = await client('http://example.com/').text();
  const agents: number = hooks.proxies;
  hooks.close();
  // @ts-expect-error: maxProxies is a number
  gotOptions(pool, { maxProxies: 'many' });

  const proxies: CrawleeProxies = crawleeProxies(pool, { where: { region: 'eu' }, context: (r) => new URL(r.url).hostname });
  // Crawlee's own declarations need the DOM library and another content-type: its option types, as it declares them.
  type NewUrlFunction = (sessionId: string | number, options?: { request?: { url: string; uniqueKey: string; id?: string } }) => string | null | Promise<string | null>;
  type PostNavigationHook = (context: { request: object; response?: object }, gotOptions: object) => Promise<void>;
  const crawler: { newUrlFunction: NewUrlFunction; postNavigationHooks: PostNavigationHook[]; errorHandler: (c: object, e: Error) => Promise<void> } = {
    newUrlFunction: proxies.newUrlFunction,
    ...proxies.hooks,
  };
  const pending: number = proxies.pending;
  void [page, body, agents, crawler, pending];
}

void clients;

void adapters;
