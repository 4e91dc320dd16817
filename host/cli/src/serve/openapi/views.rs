//! The schemas of the answers the host shapes (`ResourceView`, `CellView`,
//! `Stats`, rendered by `units::http_view`): the host's types carry no
//! schema of their own, so the server states the JSON it sends here.

use std::borrow::Cow;

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

/// Optional numbers as the views write them: null where no limit applies.
fn limits(per_context: bool) -> serde_json::Value {
    let mut properties = serde_json::json!({
        "rpm": {"type": ["integer", "null"]},
        "tpm": {"type": ["integer", "null"]},
        "min_interval_ms": {"type": ["number", "null"]},
    });
    if !per_context {
        properties["rpd"] = serde_json::json!({"type": ["integer", "null"]});
        properties["tpd"] = serde_json::json!({"type": ["integer", "null"]});
        properties["max_uses"] = serde_json::json!({"type": ["integer", "null"]});
        properties["max_age_ms"] = serde_json::json!({"type": ["number", "null"]});
        properties["per_context"] = serde_json::json!({
            "type": "object",
            "description": "Each context's own limits, as registered.",
            "properties": limits(true),
        });
    }
    properties
}

/// A window's count, `usage` or `day_usage` of a view: null where no limit
/// of that window applies.
fn usage(description: &str) -> serde_json::Value {
    serde_json::json!({
        "type": ["object", "null"],
        "description": description,
        "properties": {
            "grants": {"type": "integer", "minimum": 0, "description": "Grants in the window."},
            "tokens": {
                "type": "integer",
                "minimum": 0,
                "description": "Tokens they count against the tpm or tpd: costs, or what they reconciled to.",
            },
        },
        "required": ["grants", "tokens"],
    })
}

/// A quota group as `GET /v1/groups` lists it.
pub struct Group;

impl JsonSchema for Group {
    fn schema_name() -> Cow<'static, str> {
        "Group".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        let optional = serde_json::json!({"type": ["integer", "null"]});
        json_schema!({
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "limits": {
                    "type": "object",
                    "description": "As set by PUT /v1/groups/{name}/limits; null where no limit applies.",
                    "properties": {
                        "rpm": optional,
                        "tpm": optional,
                        "rpd": optional,
                        "tpd": optional,
                        "concurrency": optional,
                        "shared_quota": {"type": "boolean"},
                    },
                },
                "members": {"type": "integer", "minimum": 0, "description": "Resources registered in it."},
                "leased": {"type": "integer", "minimum": 0, "description": "Live leases of its members."},
                "usage": usage(
                    "For a group with an rpm or tpm: what its members' grants hold of the current 60 s window; \
                     null for one without either.",
                ),
                "day_usage": usage(
                    "For a group with an rpd or tpd: what its members' grants hold of the current rolling day; \
                     null for one without either.",
                ),
                "limited_until_unix_ms": {
                    "type": ["number", "null"],
                    "description": "No member is selected before this (a full window, or a shared quota's \
                        pause); null when none holds them back.",
                },
            },
            "required": ["name", "limits", "members", "leased", "usage", "day_usage", "limited_until_unix_ms"],
        })
    }
}

/// A resource as `GET /v1/resources` lists it.
pub struct Resource;

impl JsonSchema for Resource {
    fn schema_name() -> Cow<'static, str> {
        "Resource".into()
    }

    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "properties": {
                "resource": {"type": "object"},
                "permits": {"type": "integer"},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "limits": {
                    "type": "object",
                    "description": "As registered, durations in ms; null where no limit applies.",
                    "properties": limits(false),
                },
                "uses": {"type": "integer", "description": "Grants since it was registered."},
                "retired": {
                    "type": ["string", "null"],
                    "enum": ["max_uses", "max_age", null],
                    "description": "Why its limits retired it (it is not selected again), or null.",
                },
                "usage": usage(
                    "For a resource with an rpm or tpm: what the current 60 s window holds, as its lease \
                     authority (the store, shared by every process) counts it for the next grant; null for one \
                     without either.",
                ),
                "day_usage": usage(
                    "For a resource with an rpd or tpd: what the current rolling day holds, counted as `usage` \
                     is; null for one without either.",
                ),
                "groups": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": "The quota groups it belongs to, as registered.",
                },
                "leased": {"type": "integer"},
                "score": {"type": "integer"},
                "contexts": {"type": "integer"},
                "block": {"type": ["object", "null"]},
                "cells": {
                    "type": "array",
                    "items": g.subschema_for::<Cell>(),
                    "description": "With `cells=true` only: its cells, as /cells lists them.",
                },
            },
        })
    }
}

/// A reputation cell as `GET /v1/resources/{kind}/{value}/cells` lists it.
pub struct Cell;

impl JsonSchema for Cell {
    fn schema_name() -> Cow<'static, str> {
        "Cell".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        use repute_core::CellState;
        let states = [CellState::Healthy, CellState::Cooling, CellState::Recovering, CellState::Blocklisted];
        let states: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
        json_schema!({
            "type": "object",
            "properties": {
                "context": {"type": ["string", "null"]},
                "state": {"enum": states},
                "score": {"type": "integer"},
                "effective_score": {"type": "number"},
            },
        })
    }
}

/// A tenant's counters, `GET /v1/stats`.
pub struct Stats;

impl JsonSchema for Stats {
    fn schema_name() -> Cow<'static, str> {
        "Stats".into()
    }

    fn json_schema(g: &mut SchemaGenerator) -> Schema {
        let mut footprint = super::schema::Uint64::json_schema(g);
        footprint.insert(
            "description".into(),
            "Heap bytes the tenant's pool holds (an upper bound of what it allocated): what --max-tenant-bytes counts"
                .into(),
        );
        json_schema!({
            "type": "object",
            "properties": {
                "resources": {"type": "integer"},
                "cells": {"type": "integer"},
                "contexts": {"type": "integer"},
                "live_leases": {"type": "integer"},
                "available": {"type": "integer"},
                "due_for_probe": {"type": "integer"},
                "now": super::schema::Uint64::json_schema(g),
                "footprint": footprint,
                "refused_entries": {
                    "type": "integer",
                    "description": "Log entries this process folded or wrote that did not apply (an unregister of a \
                        resource another process removed first, say): refused alike by every process, never skipped \
                        silently",
                },
            },
        })
    }
}
