//! The web console's routes (its assets and their security headers, `/`
//! for a browser) and the paging of `GET /v1/resources` its table uses.

use super::*;

fn get(url: &str, headers: &[(&str, &str)]) -> (u16, std::collections::BTreeMap<String, String>, String) {
    let mut req = ureq::AgentBuilder::new().redirects(0).build().get(url);
    for (k, v) in headers {
        req = req.set(k, v);
    }
    let res = match req.call() {
        Ok(r) => r,
        Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("GET {url}: {e}"),
    };
    let names = res.headers_names();
    let headers = names.iter().map(|n| (n.clone(), res.header(n).unwrap_or_default().to_owned())).collect();
    (res.status(), headers, res.into_string().unwrap())
}

#[test]
fn the_console_is_served_with_a_strict_policy() {
    let dir = tempdir("console-assets");
    let s = Server::start(&["--store", "memory", "--no-auth"], &dir);
    for (path, media) in [
        ("/ui", "text/html; charset=utf-8"),
        ("/ui/console.css", "text/css; charset=utf-8"),
        ("/ui/app.js", "text/javascript; charset=utf-8"),
    ] {
        let (status, headers, body) = get(&s.url(path), NONE);
        assert_eq!(status, 200, "{path}");
        assert!(!body.is_empty(), "{path}");
        assert_eq!(headers["content-type"], media, "{path}");
        assert_eq!(headers["content-security-policy"], repute_cli::serve::console::CSP);
        assert_eq!(headers["x-frame-options"], "DENY");
        assert_eq!(headers["x-content-type-options"], "nosniff");
    }
    let csp = repute_cli::serve::console::CSP;
    for rule in ["default-src 'self'", "connect-src 'self'", "frame-ancestors 'none'", "script-src 'self'"] {
        assert!(csp.contains(rule), "{rule}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"));
    let (_, _, html) = get(&s.url("/ui"), NONE);
    // No inline script, style attribute or event handler attribute (` onclick=` and the like).
    let handler = html.match_indices(" on").any(|(at, _)| {
        let name: String = html[at + 1..].chars().take_while(char::is_ascii_alphabetic).collect();
        html[at + 1 + name.len()..].starts_with('=')
    });
    assert!(!html.contains("<script>") && !html.contains(" style=") && !handler, "nothing inline");

    let browser = [("Accept", "text/html,application/xhtml+xml,*/*;q=0.8")];
    let (status, headers, _) = get(&s.url("/"), &browser);
    assert_eq!((status, headers.get("location").map(String::as_str)), (303, Some("/ui")));
    let (status, headers, _) = get(&s.url("/"), &[("Accept", "application/json")]);
    assert_eq!((status, headers["content-type"].as_str()), (404, "application/problem+json"));
    let doc: Value = serde_json::from_str(&get(&s.url("/openapi.json"), NONE).2).unwrap();
    assert!(doc["paths"].as_object().unwrap().keys().all(|p| !p.starts_with("/ui") && p != "/"));
}

#[test]
fn resources_are_listed_a_page_at_a_time() {
    let dir = tempdir("console-paging");
    let s = Server::start(&["--store", "memory", "--no-auth"], &dir);
    for i in 0..25 {
        let region = if i % 5 == 0 { "eu" } else { "us" };
        let body = json!({"kind": if i < 20 { "proxy" } else { "key" }, "value": format!("r{i:02}"), "labels": {"region": region}});
        assert_eq!(call("POST", &s.url("/v1/resources"), NONE, Some(body)).status, 204);
    }
    let list = |query: &str| {
        let (status, headers, body) = get(&s.url(&format!("/v1/resources?{query}")), NONE);
        assert_eq!(status, 200, "{query}: {body}");
        let items: Value = serde_json::from_str(&body).unwrap();
        let values: Vec<String> =
            items.as_array().unwrap().iter().map(|r| r["resource"]["value"].as_str().unwrap().to_owned()).collect();
        (headers["repute-total"].parse::<usize>().unwrap(), values, items)
    };
    let (total, values, _) = list("kind=proxy&limit=5&offset=5");
    assert_eq!((total, values), (20, ["r05", "r06", "r07", "r08", "r09"].map(String::from).to_vec()));
    let (total, values, _) = list("label=region%3Deu&sort=-id");
    assert_eq!((total, values), (5, ["r15", "r10", "r05", "r00", "r20"].map(String::from).to_vec()));
    let (total, values, _) = list("kind=proxy&value=r07");
    assert_eq!((total, values), (1, vec!["r07".to_owned()]));
    let (total, values, _) = list("offset=24&limit=10");
    assert_eq!((total, values), (25, vec!["r19".to_owned()]));
    assert_eq!(list("").0, 25);

    assert_eq!(
        call(
            "POST",
            &s.url("/v1/outcomes"),
            NONE,
            Some(json!({"kind": "key", "value": "r21", "context": "a.com", "outcome": "success"}))
        )
        .status,
        204
    );
    let (_, values, items) = list("kind=key&sort=-score&limit=1&cells=true");
    assert_eq!(values, ["r21"]);
    let contexts: Vec<&Value> = items[0]["cells"].as_array().unwrap().iter().map(|c| &c["context"]).collect();
    assert_eq!(contexts, [&Value::Null, &json!("a.com")]);
    assert!(list("limit=1").2[0].get("cells").is_none(), "cells only when asked");

    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=x", "limit"),
        ("offset=-1", "offset"),
        ("sort=state", "sort"),
        ("label=region", "label"),
        ("label=region%3D", "label"),
        ("kind=", "kind"),
        ("value=%07", "value"),
        ("cells=maybe", "cells"),
    ] {
        let reply = call("GET", &s.url(&format!("/v1/resources?{query}")), NONE, None);
        let p = reply.problem(400, "invalid_input");
        assert_eq!(p["field"], field, "{query}");
    }
}
