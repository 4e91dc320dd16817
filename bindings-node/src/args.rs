//! What JavaScript passes, read as the host's values: the options' names in
//! their JavaScript spelling (the host names a field in its errors by these)
//! and integer arguments, which arrive as `BigInt` so that no id or count
//! above 2^53 is rounded.

use napi::bindgen_prelude::BigInt;
use repute_host::holder::Field;
use repute_host::Error;

use crate::errors::invalid;

/// The JavaScript spelling of the options the host validates.
pub(crate) fn field_name(field: Field) -> &'static str {
    match field {
        Field::Store => "store",
        Field::Tenant => "tenant",
        Field::Mode => "mode",
        Field::OwnerTtl => "ownerTtlMs",
        Field::Owners => "owners",
        Field::LeaseTtl => "leaseTtlMs",
        Field::ProbeTtl => "probeTtlMs",
        Field::Strategy => "strategy",
        Field::RenewMargin => "renewMarginMs",
        Field::Recovery => "recovery",
        Field::RateLimitRate => "rateLimit.rate",
        Field::RateLimitBurst => "rateLimit.burst",
        Field::AutoRenew => "autoRenew",
        Field::MaxHold => "maxHoldMs",
        Field::Profiles => "profiles",
    }
}

pub(crate) fn u64_arg(field: &str, n: &BigInt) -> Result<u64, Error> {
    match n.get_u64() {
        (false, v, true) => Ok(v),
        _ => Err(invalid(field, "must be an integer in 0..2^64")),
    }
}
