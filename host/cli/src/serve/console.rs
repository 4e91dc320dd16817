//! The web console at `/ui`: a page, its style sheet and its script modules,
//! written for this project and compiled into the binary, so `repute serve`
//! serves it with no build step and no network. The page calls the same API
//! with the same key as any client; these routes are not API and stay out of
//! the OpenAPI document. Every asset is sent with a strict
//! Content-Security-Policy: scripts and styles only from these files, no
//! inline code, requests only to this server, never inside a frame.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::extract::App;
use super::problem::Problem;

/// `default-src 'self'` with nothing inline; `data:` images are left out too.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; \
    connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// Each asset's path, media type and text.
const ASSETS: &[(&str, &str, &str)] = &[
    ("/ui", HTML, include_str!("../../ui/index.html")),
    ("/ui/console.css", CSS, include_str!("../../ui/console.css")),
    ("/ui/app.js", JS, include_str!("../../ui/app.js")),
    ("/ui/api.js", JS, include_str!("../../ui/api.js")),
    ("/ui/dom.js", JS, include_str!("../../ui/dom.js")),
    ("/ui/views.js", JS, include_str!("../../ui/views.js")),
    ("/ui/resource.js", JS, include_str!("../../ui/resource.js")),
    ("/ui/icon.svg", SVG, include_str!("../../ui/icon.svg")),
];

/// The console's routes, and `/` sending a browser on to it.
pub fn routes() -> Router<App> {
    let mut router = Router::new().route("/", get(root));
    for &(path, media, text) in ASSETS {
        router = router.route(path, get(move || async move { asset(media, text) }));
    }
    router
}

fn asset(media: &'static str, text: &'static str) -> Response {
    let mut res = text.into_response();
    let headers = res.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

/// `/` is the console for a browser (its Accept prefers HTML to JSON) and
/// an unknown route, as before, for an API client.
async fn root(headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if prefers_html(accept) {
        (StatusCode::SEE_OTHER, [(header::LOCATION, "/ui")]).into_response()
    } else {
        Problem::not_found("route").into_response()
    }
}

/// Whether `text/html` has a weight above zero and at least that of `application/json`.
pub fn prefers_html(accept: &str) -> bool {
    let weight = |media: &str| {
        accept
            .split(',')
            .filter_map(|part| {
                let mut params = part.split(';');
                let name = params.next()?.trim();
                name.eq_ignore_ascii_case(media).then(|| {
                    params
                        .find_map(|p| p.trim().strip_prefix("q=").and_then(|q| q.trim().parse::<f32>().ok()))
                        .unwrap_or(1.0)
                })
            })
            .fold(0.0f32, f32::max)
    };
    let html = weight("text/html");
    html > 0.0 && html >= weight("application/json")
}

#[cfg(test)]
mod tests {
    use super::prefers_html;

    #[test]
    fn a_browser_prefers_html_and_an_api_client_does_not() {
        assert!(prefers_html("text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"));
        assert!(!prefers_html("application/json"));
        assert!(!prefers_html("*/*"));
        assert!(!prefers_html(""));
        assert!(!prefers_html("text/html;q=0"));
        assert!(!prefers_html("text/html;q=0.5, application/json"));
    }
}
