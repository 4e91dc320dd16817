//! `repute simulate`: the decision-quality benchmark. Every strategy faces the
//! same seeded request stream against a hidden truth (see `scenario`), acquiring,
//! reporting and releasing as a service would, on a simulated clock so that
//! cooldowns, half-open trials, pauses and probes play out; the oracle that
//! knows the truth bounds what any strategy could have done. Every scenario
//! runs twice: with the probe loop a deployment may write, and without one
//! (what a new user runs).

mod baseline;
mod partitions;
mod report;
mod rng;
mod scenario;
mod strategy;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;

use repute_core::{FailureKind, Policy, Recovery, Strategy};

pub use report::{ScenarioReport, StrategyReport};
pub use scenario::Kind;

use baseline::{CrawleeSessions, Envoy, LitellmCooldown, Random, RetryAfterRoundRobin, RoundRobin};
use partitions::PartitionedChooser;
use rng::Rng;
use scenario::{Answer, Draw, Request, Windows, World, RESOURCES};
use strategy::{Chooser, Grant, Oracle, PoolChooser, View};

/// Points of the success-rate-over-time series each run keeps for the plot.
const SERIES_POINTS: usize = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScenarioArg {
    All,
    Steady,
    Drift,
    Context,
    Bursts,
    ApiKeys,
    Limits,
    Projects,
}

impl ScenarioArg {
    pub fn kinds(self) -> Vec<Kind> {
        match self {
            ScenarioArg::All => Kind::ALL.to_vec(),
            ScenarioArg::Steady => vec![Kind::Steady],
            ScenarioArg::Drift => vec![Kind::Drift],
            ScenarioArg::Context => vec![Kind::Context],
            ScenarioArg::Bursts => vec![Kind::Bursts],
            ScenarioArg::ApiKeys => vec![Kind::ApiKeys],
            ScenarioArg::Limits => vec![Kind::Limits],
            ScenarioArg::Projects => vec![Kind::Projects],
        }
    }
}

/// Which probe-loop variants of each scenario to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProberArg {
    Both,
    With,
    Without,
}

impl ProberArg {
    fn variants(self) -> Vec<bool> {
        match self {
            ProberArg::Both => vec![true, false],
            ProberArg::With => vec![true],
            ProberArg::Without => vec![false],
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Flags of `repute simulate`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "\
Scenarios (20 proxies, 4 sites, hidden per-site success probabilities and latencies):
  steady    an unchanging pool of premium, standard and poor proxies
  drift     proxies degrade for minutes at a time, then recover
  context   proxies good on one site are banned (blocked) on another
  bursts    waves of blocked failures take out a subnet on a site for 1-4 min
  api-keys  20 API keys, 4 models: 20 rpm per key and model (429 + Retry-After),
            keys revoked at random (401), some (key, model) pairs overloaded
  limits    sites count each proxy's requests in unpublished slices (429 +
            Retry-After), ban a proxy that keeps going over (403, 2-10 min),
            and go through overloads (503)
  projects  the api-keys provider counting per project: four projects of five keys,
            90 requests a minute per project over every key and model (429 +
            Retry-After), no per-key limit
Each runs with the probe loop a deployment may write and without one (no prober);
the default strategy never runs one.
Contenders: oracle (knows the truth), thompson (the default), thompson-classic-recovery,
classic, crawlee-sessions, litellm-cooldown, envoy-ejection, round-robin,
round-robin-retry-after (api-keys, limits, projects), random.
The same seed always gives the same output.")]
pub struct Args {
    /// Scenario to run.
    #[arg(long, value_enum, default_value = "all", env = "REPUTE_SIMULATE_SCENARIO")]
    pub scenario: ScenarioArg,
    /// Requests per scenario (about 5 per simulated second).
    #[arg(
        long,
        default_value_t = 20_000,
        value_parser = clap::value_parser!(u32).range(1..=10_000_000),
        env = "REPUTE_SIMULATE_REQUESTS"
    )]
    pub requests: u32,
    /// Seed of the hidden truth, the request stream and every strategy's randomness.
    #[arg(long, default_value_t = 1, env = "REPUTE_SIMULATE_SEED")]
    pub seed: u64,
    /// Run each scenario with the probe loop, without it, or both.
    #[arg(long, value_enum, default_value = "both", env = "REPUTE_SIMULATE_PROBER")]
    pub prober: ProberArg,
    /// Also run the default strategy split by context into this many
    /// partitions (`thompson-partitioned`): a pool each, one lease
    /// authority for all, as a partitioned tenant is served.
    #[arg(
        long,
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=64),
        env = "REPUTE_SIMULATE_PARTITIONS"
    )]
    pub partitions: u32,
    /// Output format.
    #[arg(long, value_enum, default_value = "table", env = "REPUTE_SIMULATE_FORMAT")]
    pub format: Format,
    /// Also write an SVG plot of success rate over time per strategy to this path.
    #[arg(long, value_name = "PATH")]
    pub plot: Option<PathBuf>,
}

/// The `simulate` subcommand: runs, prints, plots.
pub fn main(args: &Args) -> Result<(), String> {
    let reports: Vec<ScenarioReport> = args
        .scenario
        .kinds()
        .into_iter()
        .flat_map(|k| args.prober.variants().into_iter().map(move |p| (k, p)))
        .map(|(kind, prober)| {
            let setup = Setup { partitions: args.partitions, ..Setup::new(kind, prober, args.requests, args.seed) };
            run_scenario(&setup)
        })
        .collect();
    match args.format {
        Format::Table => print!("{}", report::table(&reports)),
        Format::Json => println!("{}", report::json(&reports)),
    }
    if let Some(path) = &args.plot {
        report::plot(&reports, path).map_err(|e| format!("cannot write plot {}: {e}", path.display()))?;
    }
    Ok(())
}

/// A strategy the simulator runs, by the name the report shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    Oracle,
    /// `Policy::default()`, used as a new user does: no probe loop.
    Thompson,
    /// The default split into partitions by context (`Setup::partitions`).
    ThompsonPartitioned,
    /// Thompson with the reputation-pool 0.5.0 recovery, which needs the
    /// probe loop for every cause but `blocked`.
    ThompsonClassicRecovery,
    /// reputation-pool 0.5.0: the classic strategy and recovery.
    Classic,
    CrawleeSessions,
    LitellmCooldown,
    EnvoyEjection,
    RoundRobin,
    RetryAfterRoundRobin,
    Random,
}

impl Contender {
    /// Every contender, oracle first; the pool's `first` strategy is for tests and is left out.
    pub const ALL: [Contender; 11] = [
        Contender::Oracle,
        Contender::Thompson,
        Contender::ThompsonPartitioned,
        Contender::ThompsonClassicRecovery,
        Contender::Classic,
        Contender::CrawleeSessions,
        Contender::LitellmCooldown,
        Contender::EnvoyEjection,
        Contender::RoundRobin,
        Contender::RetryAfterRoundRobin,
        Contender::Random,
    ];

    /// The contenders of a scenario: the Retry-After round-robin only where
    /// there are 429s to honour (elsewhere it is round-robin), the
    /// partitioned default only with partitions.
    pub fn of(kind: Kind, partitions: u32) -> Vec<Contender> {
        let waits = matches!(kind, Kind::ApiKeys | Kind::Limits | Kind::Projects);
        let runs = |c: &Contender| match c {
            Contender::RetryAfterRoundRobin => waits,
            Contender::ThompsonPartitioned => partitions > 1,
            _ => true,
        };
        Contender::ALL.into_iter().filter(runs).collect()
    }

    pub fn name(self) -> &'static str {
        match self {
            Contender::Oracle => "oracle",
            Contender::Thompson => "thompson",
            Contender::ThompsonPartitioned => "thompson-partitioned",
            Contender::ThompsonClassicRecovery => "thompson-classic-recovery",
            Contender::Classic => "classic",
            Contender::CrawleeSessions => "crawlee-sessions",
            Contender::LitellmCooldown => "litellm-cooldown",
            Contender::EnvoyEjection => "envoy-ejection",
            Contender::RoundRobin => "round-robin",
            Contender::RetryAfterRoundRobin => "round-robin-retry-after",
            Contender::Random => "random",
        }
    }

    /// The pool policy of a repute contender.
    pub fn policy(self) -> Option<Policy> {
        let classic = |strategy: Strategy| Policy { strategy, recovery: Recovery::Classic, ..Policy::default() };
        match self {
            Contender::Thompson | Contender::ThompsonPartitioned => Some(Policy::default()),
            Contender::ThompsonClassicRecovery => Some(classic(Strategy::Thompson)),
            Contender::Classic => Some(classic(Strategy::Classic)),
            _ => None,
        }
    }

    /// Whether a probe loop runs for this contender when the scenario has one:
    /// never for the default, which a new user runs without.
    fn probes(self) -> bool {
        self.policy().is_some_and(|p| p != Policy::default())
    }

    fn chooser(self, setup: &Setup) -> Box<dyn Chooser> {
        let Setup { kind, prober, seed, .. } = *setup;
        match self {
            Contender::Thompson | Contender::ThompsonClassicRecovery | Contender::Classic => {
                let policy = self.policy().expect("a pool contender has a policy");
                Box::new(PoolChooser::new(policy, kind, seed, prober && self.probes()))
            }
            Contender::ThompsonPartitioned => {
                let policy = self.policy().expect("a pool contender has a policy");
                Box::new(PartitionedChooser::new(policy, &Setup { prober: prober && self.probes(), ..*setup }))
            }
            Contender::Oracle => Box::new(Oracle),
            Contender::CrawleeSessions => Box::new(CrawleeSessions::new(seed)),
            Contender::LitellmCooldown => Box::new(LitellmCooldown::new(seed)),
            Contender::EnvoyEjection => Box::new(Envoy::default()),
            Contender::RoundRobin => Box::new(RoundRobin::default()),
            Contender::RetryAfterRoundRobin => Box::new(RetryAfterRoundRobin::default()),
            Contender::Random => Box::new(Random::new(seed)),
        }
    }
}

/// One run of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    pub kind: Kind,
    /// With the probe loop a deployment may write.
    pub prober: bool,
    pub requests: u32,
    pub seed: u64,
    /// Partitions of the `thompson-partitioned` contender; 1: it does not run.
    pub partitions: u32,
}

impl Setup {
    pub fn new(kind: Kind, prober: bool, requests: u32, seed: u64) -> Setup {
        Setup { kind, prober, requests, seed, partitions: 1 }
    }
}

/// Runs every contender on one scenario.
pub fn run_scenario(setup: &Setup) -> ScenarioReport {
    let Setup { kind, prober, requests, seed, partitions } = *setup;
    let stream = scenario::requests(kind, requests, seed);
    let horizon = stream.last().map_or(0, |r| r.at) + 60 * repute_core::SECOND;
    let world = World::new(kind, seed, horizon);
    let runs: Vec<(Contender, Tally)> = Contender::of(kind, partitions)
        .into_iter()
        .map(|c| (c, run(&world, &stream, c.chooser(setup), seed)))
        .collect();
    report::scenario(kind, prober, requests, seed, &stream, &runs)
}

/// What one contender did on one scenario.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub successes: u32,
    pub unserved: u32,
    pub probes: u32,
    /// Client requests answered 429.
    pub rate_limited: u32,
    /// Latency of every served client request, in milliseconds.
    pub latencies: Vec<f64>,
    /// Per request: whether it succeeded.
    pub hits: Vec<bool>,
}

/// One use of a resource in flight, ending at a known simulated instant.
#[derive(Debug)]
struct InFlight {
    grant: Grant,
    site: usize,
    answer: Answer,
}

/// The simulated side of the leases: which proxies are in use and until when.
#[derive(Debug)]
struct Uses {
    free: [bool; RESOURCES],
    /// (end, key into `in_flight`), earliest first; the key breaks ties in start order.
    ends: BinaryHeap<Reverse<(u64, usize)>>,
    in_flight: Vec<Option<InFlight>>,
}

impl Uses {
    fn start(&mut self, grant: Grant, site: usize, answer: Answer, now: u64) {
        assert!(self.free[grant.resource], "resource {} was granted while in use", grant.resource);
        self.free[grant.resource] = false;
        let end = now + (answer.outcome.latency_ms() * 1e6) as u64;
        self.ends.push(Reverse((end, self.in_flight.len())));
        self.in_flight.push(Some(InFlight { grant, site, answer }));
    }

    /// Reports and releases, in time order, every use that ended by `t`.
    fn finish_until(&mut self, t: u64, chooser: &mut dyn Chooser) {
        while let Some(&Reverse((end, key))) = self.ends.peek() {
            if end > t {
                break;
            }
            self.ends.pop();
            let f = self.in_flight[key].take().expect("each use ends once");
            self.free[f.grant.resource] = true;
            chooser.complete(f.grant, f.site, f.answer, end);
        }
    }
}

/// The event loop: before each arrival, finish every use that ended by then,
/// start the probes that are due (when the chooser runs a probe loop), then
/// serve the request. A request nothing can serve counts as a failure.
fn run(world: &World, stream: &[Request], mut chooser: Box<dyn Chooser>, seed: u64) -> Tally {
    let mut uses = Uses { free: [true; RESOURCES], ends: BinaryHeap::new(), in_flight: Vec::new() };
    let mut windows = Windows::new();
    let mut probe_rng = Rng::stream(seed, 300);
    let mut tally = Tally { hits: Vec::with_capacity(stream.len()), ..Tally::default() };
    for req in stream {
        let now = req.at;
        uses.finish_until(now, chooser.as_mut());
        for (grant, site) in chooser.probes(now) {
            let answer = world.answer(grant.resource, site, now, &Draw::new(&mut probe_rng), &mut windows);
            tally.probes += 1;
            uses.start(grant, site, answer, now);
        }
        let view = View { free: &uses.free, world, windows: &windows };
        match chooser.acquire(req.site, now, &view) {
            Some(grant) => {
                let answer = world.answer(grant.resource, req.site, now, &req.draw, &mut windows);
                let ok = answer.outcome.is_success();
                tally.successes += ok as u32;
                tally.rate_limited += (answer.outcome.kind() == Some(FailureKind::RateLimited)) as u32;
                tally.hits.push(ok);
                tally.latencies.push(answer.outcome.latency_ms());
                uses.start(grant, req.site, answer, now);
            }
            None => {
                tally.unserved += 1;
                tally.hits.push(false);
            }
        }
    }
    uses.finish_until(u64::MAX, chooser.as_mut());
    tally
}
