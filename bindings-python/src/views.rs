//! Read-only views of pool state (cells, resources, quota groups, stats, probe targets),
//! as frozen Python objects; the events are in `events`. Times are float seconds on the pool's clock (the same
//! clock as `Pool.now`), latencies float seconds; beside each instant a
//! `*_unix` field gives its Unix time (float seconds, as `time.time()`),
//! mapped when the view was made (see `repute_host::Wall`). Reprs show
//! Python values.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{IntoPyDict, PyDict, PyType};
use pyo3::IntoPyObjectExt;
use repute_host::{
    Block, CellView, Context, FailureKind, GroupLimits, GroupView, LeaseKind, Limits, ResourceId, ResourceView, Window,
};
use repute_host::{Stats as HostStats, Wall};

use crate::time::ns_to_secs;
use crate::typed::{self, CellState, Failure, GroupLimitsDict, Labels, LimitsDict, Retirement};

/// `Name(field=repr(value), ...)`, each value as Python's `repr` shows it.
pub(crate) fn repr<'py>(name: &str, fields: Vec<(&str, Bound<'py, PyAny>)>) -> PyResult<String> {
    let mut out = format!("{name}(");
    for (i, (field, value)) in fields.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(field);
        out.push('=');
        out.push_str(value.repr()?.to_str()?);
    }
    out.push(')');
    Ok(out)
}

/// A value for [`repr`].
pub(crate) fn py_value<'py, T: IntoPyObject<'py>>(py: Python<'py>, value: T) -> PyResult<Bound<'py, PyAny>> {
    value.into_bound_py_any(py)
}

/// `repute.FailureKind` is a Python `str` enum (idiomatic, and accepted
/// wherever a kind name is); views hand out its members.
pub(crate) fn failure_kind(py: Python<'_>, kind: FailureKind) -> PyResult<Failure<'_>> {
    static CLASS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    Ok(Failure(CLASS.import(py, "repute._types", "FailureKind")?.call1((kind.as_str(),))?))
}

pub(crate) fn lease_kind(kind: LeaseKind) -> typed::LeaseKind {
    typed::LeaseKind(match kind {
        LeaseKind::Client => "client",
        LeaseKind::Trial => "trial",
        LeaseKind::Probe => "probe",
        LeaseKind::FailOpen => "fail_open",
    })
}

/// One reputation cell: the global layer (`context` None) or one context.
#[pyclass(frozen, module = "repute")]
pub(crate) struct Cell {
    #[pyo3(get)]
    context: Option<String>,
    /// "healthy", "cooling", "recovering" or "blocklisted".
    #[pyo3(get)]
    state: CellState,
    #[pyo3(get)]
    score: i32,
    #[pyo3(get)]
    effective_score: f64,
    #[pyo3(get)]
    consecutive_failures: u32,
    #[pyo3(get)]
    consecutive_successes: u32,
    #[pyo3(get)]
    cooling_until: Option<f64>,
    #[pyo3(get)]
    cooling_until_unix: Option<f64>,
    cause: Option<FailureKind>,
    #[pyo3(get)]
    half_open: bool,
    #[pyo3(get)]
    due_for_probe: bool,
    #[pyo3(get)]
    success_rate: Option<f64>,
    #[pyo3(get)]
    latency: f64,
    #[pyo3(get)]
    observations: u64,
    #[pyo3(get)]
    blocked: bool,
    #[pyo3(get)]
    blocked_until: Option<f64>,
    #[pyo3(get)]
    blocked_until_unix: Option<f64>,
    #[pyo3(get)]
    block_reason: Option<String>,
}

#[pymethods]
impl Cell {
    /// Why the cell last cooled, while that is relevant.
    #[getter]
    fn cause<'py>(&self, py: Python<'py>) -> PyResult<Option<Failure<'py>>> {
        self.cause.map(|k| failure_kind(py, k)).transpose()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = vec![
            ("context", py_value(py, &self.context)?),
            ("state", py_value(py, self.state)?),
            ("score", py_value(py, self.score)?),
            ("effective_score", py_value(py, self.effective_score)?),
        ];
        repr("Cell", fields)
    }
}

/// Whether blocked, until when (pool clock and Unix), and why.
struct BlockParts {
    blocked: bool,
    until: Option<f64>,
    until_unix: Option<f64>,
    reason: Option<String>,
}

fn block_parts(block: Option<Block>, wall: &Wall) -> BlockParts {
    match block {
        Some(b) => BlockParts {
            blocked: true,
            until: b.until.map(ns_to_secs),
            until_unix: b.until.map(|t| wall.unix_secs(t)),
            reason: b.reason,
        },
        None => BlockParts { blocked: false, until: None, until_unix: None, reason: None },
    }
}

impl Cell {
    pub(crate) fn new(v: CellView, wall: &Wall) -> Self {
        let block = block_parts(v.block, wall);
        Cell {
            context: v.context.map(|c| c.as_str().to_owned()),
            state: CellState(v.state.as_str()),
            score: v.score,
            effective_score: v.effective_score,
            consecutive_failures: v.consecutive_failures,
            consecutive_successes: v.consecutive_successes,
            cooling_until: v.cooling_until.map(ns_to_secs),
            cooling_until_unix: v.cooling_until.map(|t| wall.unix_secs(t)),
            cause: v.cause,
            half_open: v.half_open,
            due_for_probe: v.due_for_probe,
            success_rate: v.success_rate,
            latency: v.latency_ms / 1e3,
            observations: v.observations,
            blocked: block.blocked,
            blocked_until: block.until,
            blocked_until_unix: block.until_unix,
            block_reason: block.reason,
        }
    }
}

/// One registered resource (its secret is never part of the view).
#[pyclass(frozen, module = "repute")]
pub(crate) struct Resource {
    #[pyo3(get)]
    kind: String,
    #[pyo3(get)]
    value: String,
    #[pyo3(get)]
    permits: u32,
    labels: Vec<(String, String)>,
    limits: Limits,
    /// Grants since it was registered, as its limits count them (`rpm`,
    /// `tpm`, `min_interval` and `max_uses` do; without them it stays 0).
    #[pyo3(get)]
    uses: u64,
    /// Why its limits retired it ("max_uses" or "max_age"), or None.
    #[pyo3(get)]
    retired: Option<Retirement>,
    #[pyo3(get)]
    leased: u32,
    #[pyo3(get)]
    score: i32,
    #[pyo3(get)]
    contexts: u32,
    #[pyo3(get)]
    blocked: bool,
    #[pyo3(get)]
    blocked_until: Option<f64>,
    #[pyo3(get)]
    blocked_until_unix: Option<f64>,
    #[pyo3(get)]
    block_reason: Option<String>,
    /// The quota groups it belongs to, as registered.
    #[pyo3(get)]
    groups: Vec<String>,
}

#[pymethods]
impl Resource {
    /// The resource's labels, a new dict on every read, sorted by name.
    #[getter]
    fn labels<'py>(&self, py: Python<'py>) -> PyResult<Labels<'py>> {
        Ok(Labels(self.labels.clone().into_py_dict(py)?))
    }

    /// The resource's usage limits, a new dict on every read with the
    /// limits it has, by `register`'s keyword names (durations in seconds),
    /// so `register(kind, value, **resource.limits)` registers them again.
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<LimitsDict<'py>> {
        let l = self.limits;
        let out = PyDict::new(py);
        let counts = [
            ("rpm", l.rpm.map(u64::from)),
            ("tpm", l.tpm),
            ("rpd", l.rpd.map(u64::from)),
            ("tpd", l.tpd),
            ("max_uses", l.max_uses),
        ];
        for (name, n) in counts {
            if let Some(n) = n {
                out.set_item(name, n)?;
            }
        }
        for (name, ns) in [("min_interval", l.min_interval), ("max_age", l.max_age)] {
            if let Some(ns) = ns {
                out.set_item(name, ns_to_secs(ns))?;
            }
        }
        let c = l.per_context;
        if c.counted() {
            let per = PyDict::new(py);
            for (name, n) in [("rpm", c.rpm.map(u64::from)), ("tpm", c.tpm)] {
                if let Some(n) = n {
                    per.set_item(name, n)?;
                }
            }
            if let Some(ns) = c.min_interval {
                per.set_item("min_interval", ns_to_secs(ns))?;
            }
            out.set_item("per_context", per)?;
        }
        Ok(LimitsDict(out))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = vec![
            ("kind", py_value(py, &self.kind)?),
            ("value", py_value(py, &self.value)?),
            ("permits", py_value(py, self.permits)?),
            ("leased", py_value(py, self.leased)?),
            ("score", py_value(py, self.score)?),
            ("labels", self.labels(py)?.0.into_any()),
        ];
        repr("Resource", fields)
    }
}

impl Resource {
    pub(crate) fn new(v: ResourceView, wall: &Wall) -> Self {
        let block = block_parts(v.block, wall);
        Resource {
            kind: v.resource.kind().to_owned(),
            value: v.resource.value().to_owned(),
            permits: v.permits,
            labels: v.labels.iter().map(|(n, l)| (n.to_owned(), l.to_owned())).collect(),
            limits: v.limits,
            uses: v.uses,
            retired: v.retired.map(|r| Retirement(r.as_str())),
            leased: v.leased,
            score: v.score,
            contexts: v.contexts,
            blocked: block.blocked,
            blocked_until: block.until,
            blocked_until_unix: block.until_unix,
            block_reason: block.reason,
            groups: v.groups.iter().map(|g| g.as_str().to_owned()).collect(),
        }
    }
}

/// A quota group: resources that share limits (`Pool.set_group`), joined
/// by `register(..., groups=[name])`.
#[pyclass(frozen, module = "repute")]
pub(crate) struct Group {
    #[pyo3(get)]
    name: String,
    limits: GroupLimits,
    /// Registered members.
    #[pyo3(get)]
    members: u32,
    /// Live leases of its members.
    #[pyo3(get)]
    leased: u32,
    /// Grants of its members in the current 60 s window.
    #[pyo3(get)]
    grants: u64,
    /// The tokens those grants count (costs, or what they reconciled to).
    #[pyo3(get)]
    tokens: u64,
    /// Grants of its members in the current rolling day.
    #[pyo3(get)]
    day_grants: u64,
    /// The tokens those grants count.
    #[pyo3(get)]
    day_tokens: u64,
    /// No member is selected before this (a full window, or a shared
    /// quota's pause), or None.
    #[pyo3(get)]
    limited_until: Option<f64>,
    /// `limited_until` as Unix time.
    #[pyo3(get)]
    limited_until_unix: Option<f64>,
}

#[pymethods]
impl Group {
    /// The group's limits, a new dict on every read with the limits it has,
    /// by `set_group`'s keyword names, so `set_group(name, **group.limits)`
    /// sets them again.
    #[getter]
    fn limits<'py>(&self, py: Python<'py>) -> PyResult<GroupLimitsDict<'py>> {
        let l = self.limits;
        let out = PyDict::new(py);
        let counts = [
            ("rpm", l.rpm.map(u64::from)),
            ("tpm", l.tpm),
            ("rpd", l.rpd.map(u64::from)),
            ("tpd", l.tpd),
            ("concurrency", l.concurrency.map(u64::from)),
        ];
        for (name, n) in counts {
            if let Some(n) = n {
                out.set_item(name, n)?;
            }
        }
        if l.shared_quota {
            out.set_item("shared_quota", true)?;
        }
        Ok(GroupLimitsDict(out))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = vec![
            ("name", py_value(py, &self.name)?),
            ("members", py_value(py, self.members)?),
            ("leased", py_value(py, self.leased)?),
            ("limits", self.limits(py)?.0.into_any()),
        ];
        repr("Group", fields)
    }
}

impl Group {
    pub(crate) fn new(v: GroupView, wall: &Wall) -> Self {
        let Window { grants, tokens } = v.window;
        Group {
            name: v.name.as_str().to_owned(),
            limits: v.limits,
            members: v.members,
            leased: v.leased,
            grants,
            tokens,
            day_grants: v.day.grants,
            day_tokens: v.day.tokens,
            limited_until: v.limited_until.map(ns_to_secs),
            limited_until_unix: v.limited_until.map(|ns| wall.unix_secs(ns)),
        }
    }
}

/// Pool-wide counters.
#[pyclass(frozen, get_all, module = "repute")]
pub(crate) struct Stats {
    resources: u32,
    cells: u32,
    contexts: u32,
    live_leases: u32,
    available: u32,
    due_for_probe: u32,
    now: f64,
    refused_entries: u64,
}

#[pymethods]
impl Stats {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = vec![
            ("resources", py_value(py, self.resources)?),
            ("cells", py_value(py, self.cells)?),
            ("contexts", py_value(py, self.contexts)?),
            ("live_leases", py_value(py, self.live_leases)?),
            ("available", py_value(py, self.available)?),
            ("due_for_probe", py_value(py, self.due_for_probe)?),
            ("now", py_value(py, self.now)?),
            ("refused_entries", py_value(py, self.refused_entries)?),
        ];
        repr("Stats", fields)
    }
}

impl From<HostStats> for Stats {
    fn from(s: HostStats) -> Self {
        Stats {
            resources: s.resources,
            cells: s.cells,
            contexts: s.contexts,
            live_leases: s.live_leases,
            available: s.available,
            due_for_probe: s.due_for_probe,
            now: ns_to_secs(s.now),
            refused_entries: s.refused_entries,
        }
    }
}

/// A cell waiting for a probe: `Pool.due_for_probe()` lists these.
#[pyclass(frozen, get_all, module = "repute")]
pub(crate) struct ProbeTarget {
    kind: String,
    value: String,
    context: String,
}

#[pymethods]
impl ProbeTarget {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = vec![
            ("kind", py_value(py, &self.kind)?),
            ("value", py_value(py, &self.value)?),
            ("context", py_value(py, &self.context)?),
        ];
        repr("ProbeTarget", fields)
    }

    fn __eq__(&self, other: &Self) -> bool {
        (&self.kind, &self.value, &self.context) == (&other.kind, &other.value, &other.context)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let mut h = DefaultHasher::new();
        (&self.kind, &self.value, &self.context).hash(&mut h);
        h.finish()
    }
}

impl From<(ResourceId, Context)> for ProbeTarget {
    fn from((r, c): (ResourceId, Context)) -> Self {
        ProbeTarget { kind: r.kind().to_owned(), value: r.value().to_owned(), context: c.as_str().to_owned() }
    }
}
