//! Turning tallies into the numbers people compare: the table, the JSON and the plot.

use std::fmt::Write as _;
use std::path::Path;

use plotters::prelude::*;
use repute_core::SECOND;
use serde::Serialize;

use super::scenario::{Kind, Request, CONTEXTS, RESOURCES};
use super::{Contender, Tally, SERIES_POINTS};

/// One contender's result on one scenario.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StrategyReport {
    pub strategy: String,
    /// The strategy `Policy::default()` gives new pools.
    pub default: bool,
    pub successes: u32,
    /// Requests nothing could serve (every resource busy, cooling, paused or blocked); counted as failures.
    pub unserved: u32,
    /// Requests answered 429 (api-keys, limits, projects).
    pub rate_limited: u32,
    pub success_rate: f64,
    /// Success rate as a share of the oracle's.
    pub of_oracle: f64,
    /// Oracle successes minus this strategy's.
    pub regret: i64,
    pub regret_per_request: f64,
    /// Latency of the served requests, milliseconds (nearest rank).
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Probe leases run (the pool's strategies with a probe loop only).
    pub probes: u32,
    /// Success rate per stretch of the run, for the plot.
    #[serde(skip)]
    pub series: Vec<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScenarioReport {
    #[serde(skip)]
    pub kind: Kind,
    pub scenario: String,
    /// Whether the contenders that need a probe loop ran one.
    pub prober: bool,
    pub requests: u32,
    pub seed: u64,
    /// Simulated time the run covers.
    pub minutes: f64,
    pub strategies: Vec<StrategyReport>,
    /// End of each series stretch, simulated minutes.
    #[serde(skip)]
    pub series_minutes: Vec<f64>,
}

impl ScenarioReport {
    pub fn get(&self, strategy: &str) -> Option<&StrategyReport> {
        self.strategies.iter().find(|s| s.strategy == strategy)
    }

    /// `steady`, `steady (no prober)`, ...
    pub fn title(&self) -> String {
        if self.prober {
            self.scenario.clone()
        } else {
            format!("{} (no prober)", self.scenario)
        }
    }
}

fn minutes(ns: u64) -> f64 {
    ns as f64 / (60 * SECOND) as f64
}

/// Nearest-rank percentile of sorted values; 0 when there are none.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Request index ranges of the series stretches.
fn stretches(n: usize) -> Vec<(usize, usize)> {
    let points = SERIES_POINTS.min(n);
    (0..points).map(|k| (k * n / points, (k + 1) * n / points)).collect()
}

pub(super) fn scenario(
    kind: Kind,
    prober: bool,
    requests: u32,
    seed: u64,
    stream: &[Request],
    runs: &[(Contender, Tally)],
) -> ScenarioReport {
    let oracle = runs.iter().find(|(c, _)| *c == Contender::Oracle).map_or(0, |(_, t)| t.successes);
    let n = requests.max(1) as f64;
    let parts = stretches(stream.len());
    let strategies = runs
        .iter()
        .map(|(c, t)| {
            let mut lat = t.latencies.clone();
            lat.sort_by(f64::total_cmp);
            let rate = t.successes as f64 / n;
            StrategyReport {
                strategy: c.name().to_string(),
                default: *c == Contender::Thompson,
                successes: t.successes,
                unserved: t.unserved,
                rate_limited: t.rate_limited,
                success_rate: rate,
                of_oracle: if oracle == 0 { 0.0 } else { t.successes as f64 / oracle as f64 },
                regret: oracle as i64 - t.successes as i64,
                regret_per_request: (oracle as i64 - t.successes as i64) as f64 / n,
                p50_ms: percentile(&lat, 0.5),
                p99_ms: percentile(&lat, 0.99),
                probes: t.probes,
                series: parts
                    .iter()
                    .map(|&(a, b)| t.hits[a..b].iter().filter(|&&h| h).count() as f64 / (b - a) as f64)
                    .collect(),
            }
        })
        .collect();
    ScenarioReport {
        kind,
        scenario: kind.name().to_string(),
        prober,
        requests,
        seed,
        minutes: minutes(stream.last().map_or(0, |r| r.at)),
        strategies,
        series_minutes: parts.iter().map(|&(_, b)| minutes(stream[b - 1].at)).collect(),
    }
}

/// The human-readable report: one table per scenario.
pub fn table(reports: &[ScenarioReport]) -> String {
    let mut out = String::new();
    for (i, r) in reports.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let (_, resources, contexts) = r.kind.nouns();
        let _ = writeln!(
            out,
            "scenario {}: {} requests over {:.1} simulated minutes, {} {resources}, {} {contexts}, seed {}",
            r.title(),
            r.requests,
            r.minutes,
            RESOURCES,
            CONTEXTS,
            r.seed
        );
        let _ = writeln!(
            out,
            "{:<27} {:>8} {:>9} {:>7} {:>10} {:>7} {:>7} {:>8} {:>6} {:>6}",
            "strategy",
            "success",
            "of oracle",
            "regret",
            "regret/req",
            "p50 ms",
            "p99 ms",
            "unserved",
            "429s",
            "probes"
        );
        for s in &r.strategies {
            let _ = writeln!(
                out,
                "{:<27} {:>7.2}% {:>8.2}% {:>7} {:>10.4} {:>7.0} {:>7.0} {:>8} {:>6} {:>6}",
                label(s),
                100.0 * s.success_rate,
                100.0 * s.of_oracle,
                s.regret,
                s.regret_per_request,
                s.p50_ms,
                s.p99_ms,
                s.unserved,
                s.rate_limited,
                s.probes
            );
        }
    }
    out
}

pub fn json(reports: &[ScenarioReport]) -> String {
    serde_json::to_string_pretty(reports).expect("reports serialize")
}

/// A contender's name as the table and the plot show it.
fn label(s: &StrategyReport) -> String {
    if s.default {
        format!("{} (default)", s.strategy)
    } else {
        s.strategy.clone()
    }
}

/// Line colours, one per contender in `Contender::ALL` order.
const COLOURS: [RGBColor; Contender::ALL.len()] = [
    RGBColor(0, 0, 0),
    RGBColor(214, 39, 40),
    RGBColor(255, 152, 150),
    RGBColor(227, 119, 194),
    RGBColor(31, 119, 180),
    RGBColor(140, 86, 75),
    RGBColor(23, 190, 207),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(188, 189, 34),
    RGBColor(148, 103, 189),
];

fn colour(strategy: &str) -> RGBColor {
    let i = Contender::ALL.iter().position(|c| c.name() == strategy).expect("reports name known contenders");
    COLOURS[i]
}

/// Success rate over time, one panel per scenario, one line per contender.
/// SVG only: it needs no font files or image libraries on the machine.
pub fn plot(reports: &[ScenarioReport], path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let cols = if reports.len() > 1 { 2 } else { 1 };
    let rows = reports.len().div_ceil(cols).max(1);
    let root = SVGBackend::new(path, (640 * cols as u32, 420 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    for (area, r) in root.split_evenly((rows, cols)).iter().zip(reports) {
        let lowest = r.strategies.iter().flat_map(|s| s.series.iter().copied()).fold(1.0, f64::min);
        let y_min = (libm::floor(lowest * 10.0) / 10.0).clamp(0.0, 0.9);
        let x_max = r.series_minutes.last().copied().unwrap_or(1.0).max(1e-3);
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{}: success rate over time (seed {})", r.title(), r.seed), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(48)
            .build_cartesian_2d(0.0..x_max, y_min..1.0)?;
        chart.configure_mesh().x_desc("simulated minutes").y_desc("success rate").draw()?;
        for s in &r.strategies {
            let width = if s.default || s.strategy == "oracle" { 3 } else { 1 };
            let style = colour(&s.strategy).stroke_width(width);
            let points = r.series_minutes.iter().copied().zip(s.series.iter().copied());
            chart
                .draw_series(LineSeries::new(points, style))?
                .label(label(s))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_is_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!((percentile(&v, 0.5), percentile(&v, 0.99), percentile(&v, 1.0)), (50.0, 99.0, 100.0));
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    #[test]
    fn stretches_cover_every_request_once() {
        assert_eq!(stretches(3), vec![(0, 1), (1, 2), (2, 3)]);
        let s = stretches(1000);
        assert_eq!((s.len(), s[0], s[59]), (60, (0, 16), (983, 1000)));
        assert!(s.windows(2).all(|w| w[0].1 == w[1].0));
    }
}
