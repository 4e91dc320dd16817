//! The JSON Schema of request fields whose rules a Rust type cannot say
//! (lengths, patterns, ranges the handlers or the pool enforce): one type per
//! rule, named on a field with `#[schemars(with = "schema::Name")]` (or
//! `"Option<schema::Name>"`, which adds null), so the field's own type still
//! says whether it may be left out.

use std::borrow::Cow;

use repute_host::{FailureKind, LeaseKind};
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

/// A kind, value or context: 1 to 256 characters, no control characters.
const NAME: &str = r"^[^\u0000-\u001f\u007f-\u009f]+$";
/// A label name.
const LABEL: &str = "^[A-Za-z0-9_.-]+$";

/// A field rule: a type whose schema is written in place, never referenced.
macro_rules! rule {
    ($(#[$doc:meta])* $rule:ident, |$g:ident| $schema:expr) => {
        $(#[$doc])*
        pub struct $rule;

        impl JsonSchema for $rule {
            fn inline_schema() -> bool {
                true
            }

            fn schema_name() -> Cow<'static, str> {
                stringify!($rule).into()
            }

            fn json_schema($g: &mut SchemaGenerator) -> Schema {
                $schema
            }
        }
    };
}

rule!(
    /// A kind, value or context.
    Name,
    |_g| json_schema!({"type": "string", "minLength": 1, "maxLength": 256, "pattern": NAME})
);

rule!(
    /// A label filter, `NAME=VALUE`.
    LabelIs,
    |_g| json_schema!({
        "type": "string",
        "pattern": r"^[A-Za-z0-9_.-]{1,64}=[^\u0000-\u001f\u007f-\u009f]{1,256}$",
    })
);

rule!(
    /// Names sent as a list, e.g. `exclude`.
    Names,
    |g| json_schema!({"type": "array", "maxItems": 64, "items": Name::json_schema(g)})
);

rule!(
    /// A resource's labels: at most 16, name to value.
    Labels,
    |g| json_schema!({
        "type": "object",
        "maxProperties": 16,
        "propertyNames": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": LABEL},
        "additionalProperties": Name::json_schema(g),
    })
);

rule!(
    /// An acquire's `where`: at most 8 label names, each to a value or a list of values.
    Filters,
    |g| json_schema!({
        "type": "object",
        "maxProperties": 8,
        "propertyNames": {"type": "string", "minLength": 1, "maxLength": 64, "pattern": LABEL},
        "additionalProperties": {"anyOf": [
            Name::json_schema(g),
            {"type": "array", "minItems": 1, "maxItems": 16, "items": Name::json_schema(g)},
        ]},
    })
);

rule!(
    /// Any u64 (JSON Schema has no unsigned 64-bit type of its own).
    Uint64,
    |_g| json_schema!({"type": "integer", "format": "uint64", "minimum": 0, "maximum": u64::MAX})
);

rule!(
    /// A u64 count of at least 1.
    Count,
    |_g| json_schema!({"type": "integer", "format": "uint64", "minimum": 1, "maximum": u64::MAX})
);

rule!(
    /// A duration in ms, as `units::nanos` admits it.
    Ms,
    |_g| json_schema!({"type": "number", "minimum": 1e-6, "maximum": 1e12})
);

rule!(
    /// A per-minute request limit.
    Rpm,
    |_g| json_schema!({"type": "integer", "minimum": 1, "maximum": 100_000})
);

rule!(
    /// A per-day request limit.
    Rpd,
    |_g| json_schema!({"type": "integer", "minimum": 1, "maximum": 100_000_000})
);

rule!(
    /// A quota group's most live leases.
    Concurrency,
    |_g| json_schema!({"type": "integer", "minimum": 1, "maximum": 1_000_000})
);

rule!(
    /// A resource's quota groups: at most 8 names, each once.
    Groups,
    |g| json_schema!({"type": "array", "maxItems": 8, "uniqueItems": true, "items": Name::json_schema(g)})
);

rule!(
    /// `success` or a failure kind, from the host's list of kinds.
    Outcome,
    |_g| {
        let mut names: Vec<Value> = vec!["success".into()];
        names.extend(FailureKind::ALL.iter().map(|k| k.as_str().into()));
        json_schema!({"enum": names})
    }
);

rule!(
    /// A lease's kind, named as the lease's JSON names it.
    Kind,
    |_g| {
        let kinds = [LeaseKind::Client, LeaseKind::Trial, LeaseKind::Probe, LeaseKind::FailOpen];
        let names: Vec<Value> =
            kinds.iter().map(|k| serde_json::to_value(k).expect("a lease kind is a JSON string")).collect();
        json_schema!({"enum": names})
    }
);

rule!(
    /// The forms a snapshot is exported in.
    SnapshotFormat,
    |_g| json_schema!({"enum": ["binary", "json"]})
);

/// For an answer's type: a field it leaves out when it has nothing
/// (`skip_serializing_if`) is never null, so its schema drops `null`.
pub fn left_out_not_null(schema: &mut Schema) {
    let required: Vec<Value> = schema.get("required").and_then(Value::as_array).cloned().unwrap_or_default();
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (name, property) in properties.iter_mut() {
        if required.iter().any(|r| r == name) {
            continue;
        }
        if let Some(types) = property.get_mut("type").and_then(Value::as_array_mut) {
            types.retain(|t| t != "null");
            if let [only] = types.as_slice() {
                property["type"] = only.clone();
            }
        }
    }
}
