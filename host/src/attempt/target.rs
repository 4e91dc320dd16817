//! How a request is pointed at the resource it leased, and which context
//! it counts in: the parts of the attempt protocol that depend on the
//! resource's profile and on the request, never on the HTTP library.

use crate::profile::{Preset, Profile};

/// How an adapter sends a request through a leased resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// Through the proxy whose URL is the resource's value.
    Proxy,
    /// Straight to the target, with this header set to the credential
    /// (the resource's secret), replacing any the request had.
    Header { name: &'static str, value: String },
    /// Straight to the target, as the request is: the resource has no
    /// secret, so what it stands for is the caller's to apply.
    AsIs,
}

/// The route for a resource of `profile` with `secret`: a proxy's value is
/// its URL; a key goes where its provider documents it (OpenAI and the
/// APIs that copy it: `Authorization: Bearer`; Anthropic: `x-api-key`;
/// Gemini: `x-goog-api-key`); any other secret as a bearer token.
pub fn route(profile: Profile, secret: Option<&str>) -> Route {
    match (profile, secret) {
        (Profile::Proxy, _) => Route::Proxy,
        (_, None) => Route::AsIs,
        (Profile::ApiKey(Preset::Anthropic), Some(s)) => Route::Header { name: "x-api-key", value: s.to_owned() },
        (Profile::ApiKey(Preset::Gemini), Some(s)) => Route::Header { name: "x-goog-api-key", value: s.to_owned() },
        (_, Some(s)) => Route::Header { name: "authorization", value: format!("Bearer {s}") },
    }
}

/// The context a request counts in when the caller names none: for an API
/// key the model it asks for (a key's limits are per model), from the JSON
/// body's `model` or, for Gemini, the path's `models/<model>`; else, and
/// for every other resource, the host the request goes to (a site refuses
/// or limits an exit per site).
pub fn context_of(profile: Profile, host: &str, path: &str, body: Option<&[u8]>) -> String {
    let model = match profile {
        Profile::ApiKey(Preset::Gemini) => gemini_model(path).or_else(|| body.and_then(body_model)),
        Profile::ApiKey(_) => body.and_then(body_model),
        Profile::Generic | Profile::Proxy => None,
    };
    model.unwrap_or_else(|| host.to_ascii_lowercase())
}

/// The longest model name taken as a context; a longer one is not a model.
const MAX_MODEL: usize = 128;

fn usable(model: &str) -> bool {
    !model.is_empty() && model.len() <= MAX_MODEL && model != "*" && !model.chars().any(char::is_control)
}

/// `model` of a JSON object body, when it is a usable name.
fn body_model(body: &[u8]) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Request {
        model: Option<String>,
    }
    let request: Request = serde_json::from_slice(body).ok()?;
    request.model.filter(|m| usable(m))
}

/// `<model>` of a Gemini path `.../models/<model>:<method>`.
fn gemini_model(path: &str) -> Option<String> {
    let rest = &path[path.find("/models/")? + "/models/".len()..];
    let model = rest.split([':', '/', '?']).next()?;
    usable(model).then(|| model.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_goes_where_its_provider_documents_it_and_a_proxy_carries_the_request() {
        let key = |preset| route(Profile::ApiKey(preset), Some("sk-1"));
        let bearer = Route::Header { name: "authorization", value: "Bearer sk-1".into() };
        assert_eq!(key(Preset::OpenAi), bearer);
        assert_eq!(key(Preset::Generic), bearer);
        assert_eq!(key(Preset::Anthropic), Route::Header { name: "x-api-key", value: "sk-1".into() });
        assert_eq!(key(Preset::Gemini), Route::Header { name: "x-goog-api-key", value: "sk-1".into() });
        assert_eq!(route(Profile::Generic, Some("sk-1")), bearer);
        assert_eq!(route(Profile::Proxy, Some("pw")), Route::Proxy);
        assert_eq!(route(Profile::Proxy, None), Route::Proxy);
        assert_eq!(route(Profile::ApiKey(Preset::OpenAi), None), Route::AsIs);
    }

    #[test]
    fn a_key_counts_in_its_model_and_anything_else_in_its_host() {
        let openai = Profile::ApiKey(Preset::OpenAi);
        let chat = br#"{"messages":[{"role":"user","content":"hi"}],"model":"gpt-4o-mini"}"#;
        assert_eq!(context_of(openai, "api.openai.com", "/v1/chat/completions", Some(chat)), "gpt-4o-mini");
        assert_eq!(context_of(Profile::Proxy, "Example.COM", "/", Some(chat)), "example.com");
        assert_eq!(context_of(openai, "api.openai.com", "/v1/models", None), "api.openai.com");
        assert_eq!(context_of(openai, "h", "/", Some(b"not json")), "h");
        assert_eq!(context_of(openai, "h", "/", Some(br#"{"model":42}"#)), "h");
        assert_eq!(context_of(openai, "h", "/", Some(br#"{"model":"*"}"#)), "h");
        let long = format!(r#"{{"model":"{}"}}"#, "m".repeat(MAX_MODEL + 1));
        assert_eq!(context_of(openai, "h", "/", Some(long.as_bytes())), "h");
        let gemini = Profile::ApiKey(Preset::Gemini);
        let path = "/v1beta/models/gemini-2.0-flash:generateContent";
        assert_eq!(context_of(gemini, "generativelanguage.googleapis.com", path, None), "gemini-2.0-flash");
    }
}
