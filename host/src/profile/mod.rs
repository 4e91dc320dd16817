//! What an HTTP answer means depends on what the resource is. A kind of
//! resource has a [`Profile`]: a proxy's 403 is *this site* refusing *this
//! exit* for a while, an API key's 401 is the key dead everywhere, a quota
//! error in the body pauses the key until its quota can have reset, and a
//! provider's overload is no key's fault. One table per profile, here, for
//! every front end (`report_http` in Python, `reportHttp` in Node, the
//! server's outcomes route, the probe loop); `docs/profiles.md` lists them.
//!
//! A kind's profile is declared with the pool's options ([`Profiles`]);
//! undeclared, a kind named like a profile (`proxy`, `api-key`, `openai`,
//! `anthropic`, `gemini`) has that profile and any other kind the `generic`
//! one, the table every kind had before profiles.

mod body;
mod header;
mod tables;
mod wait;

use std::collections::HashMap;
use std::time::SystemTime;

use repute_core::Outcome;

use crate::error::{Error, Result};

pub use body::MAX_ERROR_BODY;
pub use header::{reads_header, READ_HEADERS};

use header::Header;

/// How to read an API key's answers: which provider's documented errors and
/// headers. `Generic` reads the OpenAI format many APIs copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    Generic,
    OpenAi,
    Anthropic,
    Gemini,
}

/// What an answer means for a kind of resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// Any resource: 401/403/407 block it everywhere, 429 pauses it in the context.
    Generic,
    /// A proxy: the target's refusal (401/403) cools this (proxy, site)
    /// only, growing with each refusal until a success; 407 is the proxy's own.
    Proxy,
    /// An API key of a provider.
    ApiKey(Preset),
}

impl Profile {
    /// Every profile by the name users declare it with.
    pub const ALL: [(&'static str, Profile); 6] = [
        ("generic", Profile::Generic),
        ("proxy", Profile::Proxy),
        ("api-key", Profile::ApiKey(Preset::Generic)),
        ("openai", Profile::ApiKey(Preset::OpenAi)),
        ("anthropic", Profile::ApiKey(Preset::Anthropic)),
        ("gemini", Profile::ApiKey(Preset::Gemini)),
    ];

    const RULE: &'static str = "must be one of generic, proxy, api-key, openai, anthropic, gemini";

    pub fn parse(name: &str) -> Result<Profile> {
        Self::named(name).ok_or_else(|| Error::invalid("profile", Self::RULE))
    }

    fn named(name: &str) -> Option<Profile> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, p)| *p)
    }

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(_, p)| *p == self).map(|(n, _)| *n).expect("every profile is listed")
    }

    /// The profile of a kind nobody declared one for: the profile its name
    /// names, else `generic`.
    pub fn for_kind(kind: &str) -> Profile {
        Self::named(kind).unwrap_or(Profile::Generic)
    }

    /// The outcome `answer` is for a resource of this profile; `None` when
    /// it says nothing about the resource (a provider's overload), so there
    /// is nothing to report.
    pub fn classify(self, answer: &HttpAnswer) -> Result<Option<Outcome>> {
        if !(100..=599).contains(&answer.status) {
            return Err(Error::invalid("status", "must be an HTTP status code in 100..=599"));
        }
        // The latency is checked by the core's rule even when nothing is reported.
        Outcome::success(answer.latency_ms)?;
        match self {
            Profile::Generic => tables::generic(answer),
            Profile::Proxy => tables::proxy(answer),
            Profile::ApiKey(preset) => tables::api_key(preset, answer),
        }
    }
}

/// One answer of an upstream, as the holder saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpAnswer {
    pub status: u16,
    /// Name/value pairs; names are matched case-insensitively.
    pub headers: Vec<(String, String)>,
    /// The response body, when the caller has it: only an error's code,
    /// type and stated delay are read, from at most [`MAX_ERROR_BODY`] bytes.
    pub body: Option<String>,
    pub latency_ms: f64,
    /// The caller's wall clock, for waits given as instants.
    pub now: SystemTime,
}

impl HttpAnswer {
    /// An answer with just its status, seen now.
    pub fn status(status: u16, latency_ms: f64) -> HttpAnswer {
        HttpAnswer { status, headers: Vec::new(), body: None, latency_ms, now: SystemTime::now() }
    }
}

/// Header lookup by case-insensitive name.
struct Headers<'a>(&'a [(String, String)]);

impl Headers<'_> {
    fn get(&self, header: Header) -> Option<&str> {
        let name = header.name();
        self.0.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// The profiles a pool's kinds have: those declared, and for every other
/// kind [`Profile::for_kind`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profiles {
    declared: HashMap<String, Profile>,
}

impl Profiles {
    /// Kinds declared at most; a pool's kinds are few.
    pub const MAX_DECLARED: usize = 256;

    /// Declares `(kind, profile name)` pairs; a bad one is refused naming
    /// `field` (the front end's spelling of the option) and nothing is kept.
    pub fn new<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>, field: &str) -> Result<Profiles> {
        let mut declared = HashMap::new();
        for (kind, name) in pairs {
            if kind.is_empty() {
                return Err(Error::invalid(field, "kinds must not be empty"));
            }
            let profile = Profile::parse(name).map_err(|_| Error::invalid(field, Profile::RULE))?;
            declared.insert(kind.to_owned(), profile);
            if declared.len() > Self::MAX_DECLARED {
                return Err(Error::invalid(field, "must declare at most 256 kinds"));
            }
        }
        Ok(Profiles { declared })
    }

    pub fn of(&self, kind: &str) -> Profile {
        self.declared.get(kind).copied().unwrap_or_else(|| Profile::for_kind(kind))
    }

    /// The outcome `answer` is for a resource of `kind` (see [`Profile::classify`]).
    pub fn classify(&self, kind: &str, answer: &HttpAnswer) -> Result<Option<Outcome>> {
        self.of(kind).classify(answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_has_the_profile_declared_else_the_one_its_name_names() {
        let p = Profiles::new([("residential", "proxy"), ("proxy", "generic")], "profiles").unwrap();
        assert_eq!(p.of("residential"), Profile::Proxy);
        assert_eq!(p.of("proxy"), Profile::Generic);
        assert_eq!(p.of("openai"), Profile::ApiKey(Preset::OpenAi));
        assert_eq!(p.of("api-key"), Profile::ApiKey(Preset::Generic));
        assert_eq!(p.of("account"), Profile::Generic);
        for (name, profile) in Profile::ALL {
            assert_eq!(Profile::parse(name).unwrap().name(), name);
            assert_eq!(Profile::for_kind(name), profile);
        }
    }

    #[test]
    fn a_bad_declaration_names_the_field_and_keeps_nothing() {
        let rule = "must be one of generic, proxy, api-key, openai, anthropic, gemini";
        assert_eq!(Profiles::new([("proxy", "socks")], "profiles").unwrap_err(), Error::invalid("profiles", rule));
        assert_eq!(
            Profiles::new([("", "proxy")], "profiles").unwrap_err(),
            Error::invalid("profiles", "kinds must not be empty")
        );
        let many: Vec<String> = (0..=256).map(|i| format!("k{i}")).collect();
        assert_eq!(
            Profiles::new(many.iter().map(|k| (k.as_str(), "proxy")), "profiles").unwrap_err(),
            Error::invalid("profiles", "must declare at most 256 kinds")
        );
    }
}
