//! `GET /v1/resources`: the list, filtered, sorted and paged on the server,
//! so a page of a large pool (the console's table) costs one page of JSON.

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::Json;
use repute_host::{CellView, PoolOps, ResourceView};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::serve::extract::{App, AppResult, Tenant, Q};
use crate::serve::labels;
use crate::serve::openapi::schema;
use crate::serve::problem::Problem;
use crate::serve::units::http_view;
use crate::serve::usage;

/// The most resources one answer holds when `limit` is sent.
pub(super) const MAX_LIMIT: u32 = 1000;

/// The header giving how many resources match the filters, all pages together.
pub(super) const TOTAL: &str = "repute-total";

#[derive(Deserialize, JsonSchema)]
pub(super) struct ListQuery {
    /// The most resources to answer with; left out, every one from `offset` on
    #[schemars(range(min = 1, max = 1000))]
    limit: Option<u32>,
    /// How many matching resources to skip, in the list's order
    #[schemars(with = "Option<schema::Uint64>")]
    offset: Option<u64>,
    /// Only resources of this kind
    #[schemars(with = "Option<schema::Name>")]
    kind: Option<String>,
    /// Only the resource of this value (with `kind`, at most one)
    #[schemars(with = "Option<schema::Name>")]
    value: Option<String>,
    /// Only resources with this label, `NAME=VALUE`
    #[schemars(with = "Option<schema::LabelIs>")]
    label: Option<String>,
    /// The order: by id (kind, then value; the default), score or uses, each
    /// ascending; a leading `-` reverses it. Ties stay in id order.
    #[serde(default)]
    sort: Sort,
    /// Each resource with its `cells`, as `/cells` lists them
    #[serde(default)]
    cells: bool,
    /// Read from the pool that holds this context: in partitioned mode its
    /// partition's owner (partition 0's when left out), elsewhere the one pool
    #[schemars(with = "Option<schema::Name>")]
    context: Option<String>,
}

#[derive(Clone, Copy, Default, Deserialize, JsonSchema)]
enum Sort {
    #[default]
    #[serde(rename = "id")]
    Id,
    #[serde(rename = "-id")]
    IdDesc,
    #[serde(rename = "score")]
    Score,
    #[serde(rename = "-score")]
    ScoreDesc,
    #[serde(rename = "uses")]
    Uses,
    #[serde(rename = "-uses")]
    UsesDesc,
}

/// A filter's name or value, as the schema states it: 1 to `max` characters, no control characters.
fn check_name(field: &str, text: &str, max: usize) -> AppResult<()> {
    let n = text.chars().count();
    if n == 0 || n > max || text.chars().any(char::is_control) {
        return Err(Problem::invalid(field, format!("must be 1 to {max} characters, none a control character")));
    }
    Ok(())
}

/// `NAME=VALUE`, split at the first `=`.
fn label_filter(text: &str) -> AppResult<(&str, &str)> {
    let rule = "must be NAME=VALUE: a name of 1 to 64 of A-Z a-z 0-9 _ . - and a value of 1 to 256 characters";
    let (name, value) = text.split_once('=').ok_or_else(|| Problem::invalid("label", rule))?;
    let name_ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if !name_ok || check_name("label", value, 256).is_err() {
        return Err(Problem::invalid("label", rule));
    }
    Ok((name, value))
}

/// The views with `labels` as an object, `limits` in ms, the minute and
/// day windows as `usage` and `day_usage` and, when asked, their cells; a
/// view never carries a secret. `Repute-Total` says how many
/// matched before `offset` and `limit` cut the page.
pub(super) async fn resources(
    State(state): State<App>,
    Tenant(t): Tenant,
    Q(q): Q<ListQuery>,
) -> AppResult<(HeaderMap, Json<Value>)> {
    if q.limit.is_some_and(|l| !(1..=MAX_LIMIT).contains(&l)) {
        return Err(Problem::invalid("limit", format!("must be 1 to {MAX_LIMIT}")));
    }
    for (field, name) in [("kind", &q.kind), ("value", &q.value)] {
        if let Some(name) = name {
            check_name(field, name, 256)?;
        }
    }
    let label = q.label.as_deref().map(label_filter).transpose()?.map(|(n, v)| (n.to_owned(), v.to_owned()));
    let pool = super::resources::by_context(&state, &t, q.context.as_deref())?;
    let (total, page) = state
        .call(&pool, move |p| {
            let mut views: Vec<ResourceView> = p.resources()?;
            views.retain(|v| {
                q.kind.as_ref().is_none_or(|k| v.resource.kind() == k.as_str())
                    && q.value.as_ref().is_none_or(|val| v.resource.value() == val.as_str())
                    && label.as_ref().is_none_or(|(n, val)| v.labels.get(n) == Some(val.as_str()))
            });
            match q.sort {
                Sort::Id => {}
                Sort::IdDesc => views.reverse(),
                Sort::Score => views.sort_by_key(|v| v.score),
                Sort::ScoreDesc => views.sort_by_key(|v| std::cmp::Reverse(v.score)),
                Sort::Uses => views.sort_by_key(|v| v.uses),
                Sort::UsesDesc => views.sort_by_key(|v| std::cmp::Reverse(v.uses)),
            }
            let total = views.len();
            let skip = usize::try_from(q.offset.unwrap_or(0)).unwrap_or(usize::MAX);
            let take = q.limit.map_or(usize::MAX, |l| l as usize);
            let page: Vec<ResourceView> = views.into_iter().skip(skip).take(take).collect();
            let mut out = Vec::with_capacity(page.len());
            for view in page {
                let cells: Option<Vec<CellView>> =
                    if q.cells { Some(p.cells(view.resource.kind(), view.resource.value())?) } else { None };
                out.push((view, cells));
            }
            Ok((total, out))
        })
        .await?;
    let mut items = Vec::with_capacity(page.len());
    for (view, cells) in &page {
        let mut item = http_view(view, &*state.clock);
        item["labels"] = labels::object(&view.labels);
        if let Some(fields) = item.as_object_mut() {
            fields.remove("window");
            fields.remove("day");
        }
        let l = &view.limits;
        item["usage"] = usage::shown(l.rpm.is_some() || l.tpm.is_some(), &view.window);
        item["day_usage"] = usage::shown(l.rpd.is_some() || l.tpd.is_some(), &view.day);
        if let Some(cells) = cells {
            item["cells"] = http_view(cells, &*state.clock);
        }
        items.push(item);
    }
    let mut headers = HeaderMap::new();
    headers.insert(TOTAL, HeaderValue::from(total));
    Ok((headers, Json(Value::Array(items))))
}
