//! The response headers the profiles read, declared once. The tables look
//! headers up by these only, and a front end passes only these of an
//! answer's headers ([`READ_HEADERS`], [`reads_header`]), so the others
//! are never converted on the way in.

macro_rules! headers {
    ($($variant:ident = $name:literal,)*) => {
        /// A response header a profile reads.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(super) enum Header {
            $($variant,)*
        }

        impl Header {
            /// Its name, lower case.
            pub(super) fn name(self) -> &'static str {
                match self {
                    $(Header::$variant => $name,)*
                }
            }
        }

        /// Every response header a profile reads, lower case.
        pub const READ_HEADERS: &[&str] = &[$($name,)*];
    };
}

headers! {
    RetryAfter = "retry-after",
    RetryAfterMs = "retry-after-ms",
    OpenAiRemainingRequests = "x-ratelimit-remaining-requests",
    OpenAiResetRequests = "x-ratelimit-reset-requests",
    OpenAiRemainingTokens = "x-ratelimit-remaining-tokens",
    OpenAiResetTokens = "x-ratelimit-reset-tokens",
    AnthropicRequestsRemaining = "anthropic-ratelimit-requests-remaining",
    AnthropicRequestsReset = "anthropic-ratelimit-requests-reset",
    AnthropicTokensRemaining = "anthropic-ratelimit-tokens-remaining",
    AnthropicTokensReset = "anthropic-ratelimit-tokens-reset",
    AnthropicInputTokensRemaining = "anthropic-ratelimit-input-tokens-remaining",
    AnthropicInputTokensReset = "anthropic-ratelimit-input-tokens-reset",
    AnthropicOutputTokensRemaining = "anthropic-ratelimit-output-tokens-remaining",
    AnthropicOutputTokensReset = "anthropic-ratelimit-output-tokens-reset",
}

/// The rate-limit windows whose reset a spent window (remaining 0) waits
/// for: (remaining, reset) of OpenAI's requests and tokens windows, whose
/// resets are durations.
pub(super) const OPENAI_WINDOWS: [(Header, Header); 2] = [
    (Header::OpenAiRemainingRequests, Header::OpenAiResetRequests),
    (Header::OpenAiRemainingTokens, Header::OpenAiResetTokens),
];

/// Anthropic's requests, tokens, input- and output-tokens windows, whose
/// resets are instants.
pub(super) const ANTHROPIC_WINDOWS: [(Header, Header); 4] = [
    (Header::AnthropicRequestsRemaining, Header::AnthropicRequestsReset),
    (Header::AnthropicTokensRemaining, Header::AnthropicTokensReset),
    (Header::AnthropicInputTokensRemaining, Header::AnthropicInputTokensReset),
    (Header::AnthropicOutputTokensRemaining, Header::AnthropicOutputTokensReset),
];

/// Whether a profile reads response header `name` (in any case).
pub fn reads_header(name: &str) -> bool {
    READ_HEADERS.iter().any(|n| n.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_lower_case_and_each_read_once() {
        for (i, name) in READ_HEADERS.iter().enumerate() {
            assert_eq!(name.to_ascii_lowercase(), *name);
            assert!(!READ_HEADERS[..i].contains(name), "{name} twice");
        }
        assert!(reads_header("Retry-After") && reads_header("X-RateLimit-Reset-Tokens"));
        assert!(!reads_header("content-type") && !reads_header("retry-after-"));
    }
}
