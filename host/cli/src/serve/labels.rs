//! Labels, secrets, quota groups and selectors as the HTTP API writes them:
//! a resource's labels as an object of name → value, its groups as an array
//! of names, an acquire's `where` as an object of name → one value or an
//! array of them. The core validates them; a refusal names the request's
//! field (`labels`, `secret`, `groups`, and for an acquire `kind`, `where`,
//! `exclude`, `prefer`, `affinity`).

use std::collections::BTreeMap;
use std::fmt;

use repute_host::{GroupName, LabelFilter, Labels, Limits, Registration, Secret, Selector};
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::extract::AppResult;
use super::problem::Problem;

/// A `where` filter's values: `"eu"` stands for `["eu"]`.
#[derive(Debug)]
pub struct Values(Vec<String>);

impl<'de> Deserialize<'de> for Values {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Values, D::Error> {
        struct Either;

        impl<'de> Visitor<'de> for Either {
            type Value = Values;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or an array of strings")
            }

            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Values, E> {
                Ok(Values(vec![v.to_owned()]))
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Values, A::Error> {
                let mut values = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(16));
                while let Some(v) = seq.next_element()? {
                    values.push(v);
                }
                Ok(Values(values))
            }
        }

        d.deserialize_any(Either)
    }
}

/// The selector of `POST /v1/leases` from its parts, `where` filters sorted by name.
pub fn selector(
    kind: Option<String>,
    filters: BTreeMap<String, Values>,
    exclude: Vec<String>,
    prefer: Option<String>,
    affinity: Option<String>,
) -> Selector {
    let labels = filters.into_iter().map(|(name, Values(values))| LabelFilter { name, values }).collect();
    Selector { kind, labels, exclude, prefer, affinity, cost: None }
}

fn refused(e: repute_core::Error) -> Problem {
    Problem::from(repute_host::Error::from(e))
}

/// A registration from the body of `POST /v1/resources`, its labels,
/// secret and group names checked by the core's rules before it goes to the
/// pool (which checks the rest, how many groups and repeats among them). A
/// bad group name is the request's `groups`, where the core says `group`.
pub fn registration(
    permits: u32,
    limits: Limits,
    labels: BTreeMap<String, String>,
    secret: Option<String>,
    groups: Vec<String>,
) -> AppResult<Registration> {
    let labels = Labels::new(labels).map_err(refused)?;
    let secret = secret.map(Secret::new).transpose().map_err(refused)?;
    let groups = groups.into_iter().map(GroupName::new).collect::<Result<Vec<_>, _>>().map_err(|e| {
        match repute_host::Error::from(e) {
            repute_host::Error::InvalidInput { rule, .. } => Problem::invalid("groups", rule),
            other => Problem::from(other),
        }
    })?;
    Ok(Registration { permits, limits, labels, secret, groups })
}

/// Labels as a view shows them.
pub fn object(labels: &Labels) -> Value {
    Value::Object(labels.iter().map(|(name, value)| (name.to_owned(), Value::from(value))).collect::<Map<_, _>>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn filters(v: Value) -> Result<BTreeMap<String, Values>, String> {
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    #[test]
    fn a_where_value_is_one_string_or_an_array_of_them() {
        let parsed = filters(json!({"tier": ["paid", "free"], "region": "eu"})).unwrap();
        let s = selector(Some("key".into()), parsed, vec!["k1".into()], None, Some("user-7".into()));
        let named: Vec<(&str, Vec<&str>)> =
            s.labels.iter().map(|f| (f.name.as_str(), f.values.iter().map(String::as_str).collect())).collect();
        assert_eq!(named, [("region", vec!["eu"]), ("tier", vec!["paid", "free"])]);
        assert_eq!((s.kind.as_deref(), s.exclude.as_slice(), s.prefer), (Some("key"), &["k1".to_owned()][..], None));
        assert_eq!(s.affinity.as_deref(), Some("user-7"));
        assert_eq!(
            filters(json!({"tier": 5})).unwrap_err(),
            "invalid type: integer `5`, expected a string or an array of strings"
        );
        assert_eq!(filters(json!({"tier": [5]})).unwrap_err(), "invalid type: integer `5`, expected a string");
    }

    #[test]
    fn a_registration_is_checked_by_the_cores_rules_and_labels_show_as_an_object() {
        let labels = BTreeMap::from([("tier".to_owned(), "paid".to_owned()), ("region".to_owned(), "eu".to_owned())]);
        let r = registration(2, Limits::default(), labels, Some("sk-1".into()), vec!["project:a".into()]).unwrap();
        assert_eq!(r.secret.as_ref().map(Secret::expose), Some("sk-1"));
        assert_eq!(r.groups.iter().map(GroupName::as_str).collect::<Vec<_>>(), ["project:a"]);
        assert_eq!(object(&r.labels), json!({"region": "eu", "tier": "paid"}));
        let p = registration(1, Limits::default(), BTreeMap::new(), Some(String::new()), vec![]).unwrap_err();
        assert_eq!((p.0.field.as_deref(), p.0.status), (Some("secret"), 400));
        let p = registration(1, Limits::default(), BTreeMap::from([("a b".to_owned(), "x".to_owned())]), None, vec![])
            .unwrap_err();
        assert_eq!(p.0.field.as_deref(), Some("labels"));
        let p = registration(1, Limits::default(), BTreeMap::new(), None, vec![String::new()]).unwrap_err();
        assert_eq!((p.0.field.as_deref(), p.0.rule.as_deref()), (Some("groups"), Some("must not be empty")));
    }
}
