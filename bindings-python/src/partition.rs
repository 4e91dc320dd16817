//! The partition map of partitioned mode (`repute serve --mode
//! partitioned`): which partition holds a context, and which granted a
//! lease, as every server computes them, so a client can send a request
//! straight to the owner `GET /v1/partitions` names.

use pyo3::prelude::*;

use crate::errors::{to_py, Failure};

/// The partition, of `partitions` (1 to 64), that holds `context`.
#[pyfunction]
pub(crate) fn partition_of(py: Python<'_>, context: &str, partitions: u32) -> PyResult<u32> {
    repute_host::check_partitions(partitions).map_err(|e| to_py(py, Failure::Host(e)))?;
    Ok(repute_host::partition_of(context, partitions))
}

/// The partition, of `partitions` (1 to 64), whose owner granted the lease `lease_id`.
#[pyfunction]
pub(crate) fn lease_partition(py: Python<'_>, lease_id: u64, partitions: u32) -> PyResult<u32> {
    repute_host::check_partitions(partitions).map_err(|e| to_py(py, Failure::Host(e)))?;
    Ok(repute_host::lease_partition(lease_id, partitions))
}
