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
                "usage": {
                    "type": ["object", "null"],
                    "description": "For a resource with an rpm or tpm: what the current 60 s window holds, as its \
                        lease authority (the store, shared by every process) counts it for the next grant; null \
                        for one without either.",
                    "properties": {
                        "grants": {"type": "integer", "minimum": 0, "description": "Grants in the window."},
                        "tokens": {
                            "type": "integer",
                            "minimum": 0,
                            "description": "Tokens they count against the tpm: costs, or what they reconciled to.",
                        },
                    },
                    "required": ["grants", "tokens"],
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
            },
        })
    }
}
