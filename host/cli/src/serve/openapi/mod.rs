//! The OpenAPI document of the HTTP API, derived from the code: each route of
//! `routes::table` carries its documentation next to its handler, and the
//! bodies, path segments and queries are described by their own Rust types
//! (`JsonSchema`), so the document cannot list a route the server lacks or a
//! field its types do not have. `repute openapi` prints it; the copy in the
//! repository (`host/cli/openapi.json`, the one served) is checked against it.

pub mod schema;
pub mod views;

use axum::http::Method;
use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::problem::ProblemBody;

const DESCRIPTION: &str = "A reputation-aware resource pool with fenced leases. Every /v1 route acts on one tenant: the one the API key (Authorization: Bearer KEY, or X-Api-Key) is bound to; with auth off, the Repute-Tenant header (default `default`). Errors are RFC 9457 problem+json with `type` urn:repute:problem:<code>. Every refusal, including unknown routes (404), wrong methods (405, with Allow), oversized bodies (413) and unparsable paths or queries (400), is problem+json; `field` names the request field (body, path or query) that was refused.";

type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

fn own_schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    T::json_schema(g)
}

fn list_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({"type": "array", "items": g.subschema_for::<T>()})
}

/// Who may call a route.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// A tenant's route: wants a key (or the tenant header with auth off),
    /// and can meet every refusal a tenant's call can.
    Tenant,
    /// Open to anyone, like a load balancer's probe.
    Open,
}

/// What a request body is.
enum RequestBody {
    Json(SchemaOf),
    /// Sent as is, in one of these media types.
    Raw(&'static [&'static str]),
}

/// One answer of a route.
struct Answer {
    status: u16,
    description: &'static str,
    content: Option<Value>,
    headers: Option<Value>,
    /// The JSON body's schema, when `content` is left to it.
    json: Option<SchemaOf>,
}

/// The documentation of one route and method.
pub struct Doc {
    summary: &'static str,
    description: Option<&'static str>,
    access: Access,
    path: Option<SchemaOf>,
    query: Option<SchemaOf>,
    body: Option<RequestBody>,
    answers: Vec<Answer>,
}

impl Doc {
    /// A tenant's route.
    pub fn tenant(summary: &'static str) -> Doc {
        Doc { summary, description: None, access: Access::Tenant, path: None, query: None, body: None, answers: vec![] }
    }

    /// A route open to anyone.
    pub fn open(summary: &'static str) -> Doc {
        Doc { access: Access::Open, ..Doc::tenant(summary) }
    }

    pub fn describe(mut self, description: &'static str) -> Doc {
        self.description = Some(description);
        self
    }

    /// The path's segments, as the handler's `P<T>` reads them.
    pub fn path<T: JsonSchema>(mut self) -> Doc {
        self.path = Some(own_schema_of::<T>);
        self
    }

    /// The query, as the handler's `Q<T>` reads it.
    pub fn query<T: JsonSchema>(mut self) -> Doc {
        self.query = Some(own_schema_of::<T>);
        self
    }

    /// A JSON body, as the handler's `Body<T>` reads it.
    pub fn body<T: JsonSchema>(mut self) -> Doc {
        self.body = Some(RequestBody::Json(schema_of::<T>));
        self
    }

    /// A body taken as is, in one of `types`.
    pub fn raw_body(mut self, types: &'static [&'static str]) -> Doc {
        self.body = Some(RequestBody::Raw(types));
        self
    }

    fn answer(mut self, status: u16, description: &'static str, json: Option<SchemaOf>, content: Option<Value>) -> Doc {
        self.answers.push(Answer { status, description, content, headers: None, json });
        self
    }

    /// An answer without a body.
    pub fn empty(self, status: u16, description: &'static str) -> Doc {
        self.answer(status, description, None, None)
    }

    /// A JSON answer of type `T`.
    pub fn json<T: JsonSchema>(self, status: u16, description: &'static str) -> Doc {
        self.answer(status, description, Some(schema_of::<T>), None)
    }

    /// A JSON answer listing `T`s.
    pub fn list<T: JsonSchema>(self, status: u16, description: &'static str) -> Doc {
        self.answer(status, description, Some(list_of::<T>), None)
    }

    /// An answer in one of `types`, of no schema.
    pub fn media(self, status: u16, description: &'static str, types: &[&str]) -> Doc {
        let content = types.iter().map(|t| (t.to_string(), json!({}))).collect::<Map<_, _>>();
        self.answer(status, description, None, Some(Value::Object(content)))
    }

    /// A refusal: problem+json.
    pub fn problem(self, status: u16, description: &'static str) -> Doc {
        self.answer(status, description, None, Some(problem_content()))
    }

    /// A header of the last answer.
    pub fn header(mut self, name: &str, description: &str, kind: &str) -> Doc {
        let last = self.answers.last_mut().expect("a header follows its answer");
        let headers = last.headers.get_or_insert_with(|| json!({}));
        headers[name] = json!({"description": description, "schema": {"type": kind}});
        self
    }

    /// The operation object of this route and method.
    fn operation(&self, g: &mut SchemaGenerator) -> Value {
        let mut op = json!({"summary": self.summary});
        if let Some(d) = self.description {
            op["description"] = d.into();
        }
        if self.access == Access::Open {
            op["security"] = json!([]);
        }
        let mut parameters = Vec::new();
        if let Some(path) = self.path {
            parameters.extend(parameters_of(path(g), "path"));
        }
        if let Some(query) = self.query {
            parameters.extend(parameters_of(query(g), "query"));
        }
        if !parameters.is_empty() {
            op["parameters"] = Value::Array(parameters);
        }
        let mut answers = Vec::new();
        match &self.body {
            Some(RequestBody::Json(schema)) => {
                op["requestBody"] = json!({"required": true, "content": {"application/json": {"schema": schema(g)}}});
            }
            Some(RequestBody::Raw(types)) => {
                let content = types.iter().map(|t| (t.to_string(), json!({}))).collect::<Map<_, _>>();
                op["requestBody"] = json!({"required": true, "content": content});
            }
            None => {}
        }
        if self.access == Access::Tenant {
            answers.extend(
                TENANT_REFUSALS.iter().map(|&(s, d)| (s, json!({"description": d, "content": problem_content()}))),
            );
            match self.body {
                Some(RequestBody::Json(_)) => answers.extend(
                    [TOO_LARGE, NOT_JSON].map(|(s, d)| (s, json!({"description": d, "content": problem_content()}))),
                ),
                Some(RequestBody::Raw(_)) => {
                    answers.push((TOO_LARGE.0, json!({"description": TOO_LARGE.1, "content": problem_content()})))
                }
                None => {}
            }
        }
        answers.push((
            405,
            json!({
                "description": "The route has no such method; the Allow header lists the ones it has",
                "content": problem_content(),
                "headers": {"Allow": {"description": "The methods this route has, comma-separated", "schema": {"type": "string"}}},
            }),
        ));
        for a in &self.answers {
            let mut answer = json!({"description": a.description});
            if let Some(schema) = a.json {
                answer["content"] = json!({"application/json": {"schema": schema(g)}});
            } else if let Some(content) = &a.content {
                answer["content"] = content.clone();
            }
            if let Some(headers) = &a.headers {
                answer["headers"] = headers.clone();
            }
            answers.push((a.status, answer));
        }
        op["responses"] = Value::Object(answers.into_iter().map(|(s, a)| (s.to_string(), a)).collect());
        op
    }
}

/// The refusals every tenant's route can answer.
const TENANT_REFUSALS: [(u16, &str); 5] = [
    (400, "Invalid input: `field` and `rule` name what was refused"),
    (401, "Missing or unknown API key"),
    (403, "The key is for another tenant"),
    (421, "Sharded mode: another process owns the tenant; `owner` is its base URL, resend there"),
    (503, "The store refused the write (stale owner epoch, version conflict) or is unreachable; nothing was applied"),
];
const TOO_LARGE: (u16, &str) = (413, "The body is over the server's --max-body-bytes; `field` is `body`");
const NOT_JSON: (u16, &str) = (415, "The body was not sent as Content-Type: application/json");

fn problem_content() -> Value {
    json!({"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}})
}

/// The parameters of a path or query type: one per property, required where
/// the type requires it. A query parameter is left out rather than null, so
/// an optional one's schema drops `null`.
fn parameters_of(schema: Schema, place: &str) -> Vec<Value> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let empty = Map::new();
    let properties = schema.get("properties").and_then(Value::as_object).unwrap_or(&empty);
    let mut out = Vec::new();
    for (name, property) in properties {
        let mut property = property.clone();
        let description = property.as_object_mut().and_then(|p| p.remove("description"));
        if let Some(types) = property.get_mut("type").and_then(Value::as_array_mut) {
            types.retain(|t| t != "null");
            if types.len() == 1 {
                property["type"] = types[0].clone();
            }
        }
        if let Some(values) = property.get_mut("enum").and_then(Value::as_array_mut) {
            values.retain(|v| !v.is_null());
        }
        let mut p = json!({"name": name, "in": place, "schema": property});
        if place == "path" || required.contains(&name.as_str()) {
            p["required"] = true.into();
        }
        if let Some(d) = description {
            p["description"] = d;
        }
        out.push(p);
    }
    out
}

/// The whole document, from the routes' table.
pub fn document(operations: &[(Method, &'static str, &Doc)]) -> Value {
    let mut settings = SchemaSettings::draft2020_12();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    let mut g = SchemaGenerator::new(settings);
    g.subschema_for::<ProblemBody>();
    let mut paths = Map::new();
    for (method, path, doc) in operations {
        let entry = paths.entry(path.to_string()).or_insert_with(|| json!({}));
        entry[method.as_str().to_ascii_lowercase()] = doc.operation(&mut g);
    }
    let mut document = json!({
        "openapi": "3.1.0",
        "info": {"title": "repute", "version": env!("CARGO_PKG_VERSION"), "description": DESCRIPTION},
        "security": [{"bearer": []}, {"apiKey": []}],
        "paths": paths,
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
            },
            "schemas": g.take_definitions(true),
        },
    });
    unwrap_descriptions(&mut document);
    document
}

/// Descriptions taken from doc comments as one line each: the comments'
/// line breaks are only where the source wraps.
fn unwrap_descriptions(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                match v {
                    Value::String(s) if key == "description" => *s = s.replace('\n', " "),
                    v => unwrap_descriptions(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(unwrap_descriptions),
        _ => {}
    }
}

/// The document as the repository keeps it: pretty JSON and a final newline.
pub fn render(operations: &[(Method, &'static str, &Doc)]) -> String {
    let mut text = serde_json::to_string_pretty(&document(operations)).expect("a JSON value renders");
    text.push('\n');
    text
}
