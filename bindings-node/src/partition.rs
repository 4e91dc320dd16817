//! The partition map of partitioned mode (`repute serve --mode
//! partitioned`): which partition holds a context, and which granted a
//! lease, as every server computes them, so a client can send a request
//! straight to the owner `GET /v1/partitions` names.

use napi::bindgen_prelude::BigInt;
use napi_derive::napi;

use crate::args::u64_arg;
use crate::errors::OrThrow;

/// The partition, of `partitions` (1 to 64), that holds `context`.
#[napi]
pub fn partition_of(context: String, partitions: u32) -> napi::Result<u32> {
    repute_host::check_partitions(partitions).or_throw()?;
    Ok(repute_host::partition_of(&context, partitions))
}

/// The partition, of `partitions` (1 to 64), whose owner granted the lease `leaseId`.
#[napi]
pub fn lease_partition(lease_id: BigInt, partitions: u32) -> napi::Result<u32> {
    let id = u64_arg("leaseId", &lease_id).or_throw()?;
    repute_host::check_partitions(partitions).or_throw()?;
    Ok(repute_host::lease_partition(id, partitions))
}
