//! `repute simulate`: the decision-quality benchmark. Every strategy faces the
//! same seeded request stream against a hidden truth (see `scenario`), acquiring,
//! reporting and releasing as a service would, on a simulated clock so that
//! cooldowns, half-open trials and probes play out; the oracle that knows the
//! truth bounds what any strategy could have done.

mod baseline;
mod report;
mod rng;
mod scenario;
mod strategy;

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::PathBuf;

use repute_core::{Outcome, Policy, Strategy};

pub use report::{ScenarioReport, StrategyReport};
pub use scenario::Kind;

use baseline::{Envoy, Random, RoundRobin};
use rng::Rng;
use scenario::{Draw, Request, World, RESOURCES};
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
}

impl ScenarioArg {
    pub fn kinds(self) -> Vec<Kind> {
        match self {
            ScenarioArg::All => Kind::ALL.to_vec(),
            ScenarioArg::Steady => vec![Kind::Steady],
            ScenarioArg::Drift => vec![Kind::Drift],
            ScenarioArg::Context => vec![Kind::Context],
            ScenarioArg::Bursts => vec![Kind::Bursts],
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
  steady   an unchanging pool of premium, standard and poor proxies
  drift    proxies degrade for minutes at a time, then recover
  context  proxies good on one site are banned (blocked) on another
  bursts   waves of blocked failures take out a subnet on a site for 1-4 min
Contenders: oracle (knows the truth), thompson, classic, envoy-ejection, round-robin, random.
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
    /// Output format.
    #[arg(long, value_enum, default_value = "table", env = "REPUTE_SIMULATE_FORMAT")]
    pub format: Format,
    /// Also write an SVG plot of success rate over time per strategy to this path.
    #[arg(long, value_name = "PATH")]
    pub plot: Option<PathBuf>,
}

/// The `simulate` subcommand: runs, prints, plots.
pub fn main(args: &Args) -> Result<(), String> {
    let reports: Vec<ScenarioReport> =
        args.scenario.kinds().into_iter().map(|k| run_scenario(k, args.requests, args.seed)).collect();
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
    Pool(Strategy),
    EnvoyEjection,
    RoundRobin,
    Random,
}

impl Contender {
    /// Every contender, oracle first; the pool's `first` strategy is for tests and is left out.
    pub const ALL: [Contender; 6] = [
        Contender::Oracle,
        Contender::Pool(Strategy::Thompson),
        Contender::Pool(Strategy::Classic),
        Contender::EnvoyEjection,
        Contender::RoundRobin,
        Contender::Random,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Contender::Oracle => "oracle",
            Contender::Pool(s) => s.as_str(),
            Contender::EnvoyEjection => "envoy-ejection",
            Contender::RoundRobin => "round-robin",
            Contender::Random => "random",
        }
    }

    fn chooser(self, seed: u64) -> Box<dyn Chooser> {
        match self {
            Contender::Oracle => Box::new(Oracle),
            Contender::Pool(s) => Box::new(PoolChooser::new(s, seed)),
            Contender::EnvoyEjection => Box::new(Envoy::default()),
            Contender::RoundRobin => Box::new(RoundRobin::default()),
            Contender::Random => Box::new(Random::new(seed)),
        }
    }
}

/// Runs every contender on one scenario.
pub fn run_scenario(kind: Kind, requests: u32, seed: u64) -> ScenarioReport {
    let stream = scenario::requests(kind, requests, seed);
    let horizon = stream.last().map_or(0, |r| r.at) + 60 * repute_core::SECOND;
    let world = World::new(kind, seed, horizon);
    let default = Policy::default().strategy;
    let runs: Vec<(Contender, Tally)> =
        Contender::ALL.iter().map(|&c| (c, run(&world, &stream, c.chooser(seed), seed))).collect();
    report::scenario(kind, requests, seed, &stream, &runs, default)
}

/// What one contender did on one scenario.
#[derive(Debug, Clone, Default)]
pub struct Tally {
    pub successes: u32,
    pub unserved: u32,
    pub probes: u32,
    /// Latency of every served client request, in milliseconds.
    pub latencies: Vec<f64>,
    /// Per request: whether it succeeded.
    pub hits: Vec<bool>,
}

/// One use of a proxy in flight, ending at a known simulated instant.
#[derive(Debug)]
struct InFlight {
    grant: Grant,
    site: usize,
    outcome: Outcome,
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
    fn start(&mut self, grant: Grant, site: usize, outcome: Outcome, now: u64) {
        assert!(self.free[grant.resource], "proxy {} was granted while in use", grant.resource);
        self.free[grant.resource] = false;
        let end = now + (outcome.latency_ms() * 1e6) as u64;
        self.ends.push(Reverse((end, self.in_flight.len())));
        self.in_flight.push(Some(InFlight { grant, site, outcome }));
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
            chooser.complete(f.grant, f.site, f.outcome, end);
        }
    }
}

/// The event loop: before each arrival, finish every use that ended by then,
/// start the probes that are due (as a deployment's probe loop would), then
/// serve the request. A request nothing can serve counts as a failure.
fn run(world: &World, stream: &[Request], mut chooser: Box<dyn Chooser>, seed: u64) -> Tally {
    let mut uses = Uses { free: [true; RESOURCES], ends: BinaryHeap::new(), in_flight: Vec::new() };
    let mut probe_rng = Rng::stream(seed, 300);
    let mut tally = Tally { hits: Vec::with_capacity(stream.len()), ..Tally::default() };
    for req in stream {
        let now = req.at;
        uses.finish_until(now, chooser.as_mut());
        for (grant, site) in chooser.probes(now) {
            let outcome = world.outcome(grant.resource, site, now, &Draw::new(&mut probe_rng));
            tally.probes += 1;
            uses.start(grant, site, outcome, now);
        }
        let view = View { free: &uses.free, world };
        match chooser.acquire(req.site, now, &view) {
            Some(grant) => {
                let outcome = world.outcome(grant.resource, req.site, now, &req.draw);
                tally.successes += outcome.is_success() as u32;
                tally.hits.push(outcome.is_success());
                tally.latencies.push(outcome.latency_ms());
                uses.start(grant, req.site, outcome, now);
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
