//! The waits a provider states: `Retry-After` (RFC 9110 §10.2.3: seconds or
//! an HTTP-date), OpenAI's `retry-after-ms` and `x-ratelimit-reset-*`
//! (durations such as `1s`, `6m0s`, `20ms`), Anthropic's
//! `anthropic-ratelimit-*-reset` (an RFC 3339 instant), and a delay written
//! in an error body (`37s`, "try again in 1.2s"). Every wait is in
//! nanoseconds, capped at the longest an outcome may carry; an instant is
//! turned into a wait from the caller's wall clock, so only the caller's own
//! clock is compared with the provider's. A value that parses as nothing is
//! ignored, as if absent.

use std::time::{Duration, SystemTime};

use repute_core::MAX_RETRY_AFTER;

use super::header::{Header, ANTHROPIC_WINDOWS, OPENAI_WINDOWS};
use super::Headers;

/// The wait the answer's headers ask for before this resource is used
/// again, the most explicit first: `retry-after-ms`, then `Retry-After`.
pub(super) fn retry_after(headers: &Headers<'_>, now: SystemTime) -> Option<u64> {
    let ms = headers.get(Header::RetryAfterMs).and_then(|v| v.trim().parse::<f64>().ok());
    if let Some(ms) = ms.filter(|ms| ms.is_finite() && *ms >= 0.0) {
        return Some(nanos((ms * 1e6) as u128));
    }
    headers.get(Header::RetryAfter).and_then(|v| retry_after_value(v, now))
}

/// The latest reset among the rate-limit windows the headers say are spent
/// (remaining 0): OpenAI's requests and tokens windows, Anthropic's
/// requests, tokens, input- and output-tokens windows.
pub(super) fn spent_window_reset(headers: &Headers<'_>, now: SystemTime) -> Option<u64> {
    let spent = |remaining: Header| headers.get(remaining).is_some_and(|v| v.trim() == "0");
    let openai = OPENAI_WINDOWS
        .into_iter()
        .filter_map(|(remaining, reset)| spent(remaining).then(|| headers.get(reset).and_then(go_duration))?);
    let anthropic = ANTHROPIC_WINDOWS
        .into_iter()
        .filter_map(|(remaining, reset)| spent(remaining).then(|| headers.get(reset).and_then(|v| instant(v, now)))?);
    openai.chain(anthropic).max()
}

/// A `Retry-After` value: delta-seconds or an HTTP-date (a date in the
/// past is a wait of 0).
pub(super) fn retry_after_value(value: &str, now: SystemTime) -> Option<u64> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(value.parse::<u64>().map_or(MAX_RETRY_AFTER, |s| nanos(u128::from(s) * 1_000_000_000)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(nanos(at.duration_since(now).unwrap_or(Duration::ZERO).as_nanos()))
}

/// A Go-style duration as providers write them (`1s`, `6m0s`, `1h2m3.5s`,
/// `20ms`, `1.2s`): one or more numbers, each with its unit.
pub(super) fn go_duration(value: &str) -> Option<u64> {
    let mut rest = value.trim();
    if rest.is_empty() {
        return None;
    }
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit] {
            "h" => 3600e9,
            "m" => 60e9,
            "s" => 1e9,
            "ms" => 1e6,
            "us" | "µs" => 1e3,
            "ns" => 1.0,
            _ => return None,
        };
        total += number * scale;
        rest = &rest[unit..];
    }
    total.is_finite().then(|| nanos(total as u128))
}

/// An RFC 3339 instant (`2026-12-03T10:00:30Z`, fractions and offsets
/// allowed) as the wait until it from `now`.
pub(super) fn instant(value: &str, now: SystemTime) -> Option<u64> {
    let at = humantime::parse_rfc3339_weak(value.trim()).ok()?;
    Some(nanos(at.duration_since(now).unwrap_or(Duration::ZERO).as_nanos()))
}

/// The delay an error message states in words, as OpenAI writes it:
/// "... Please try again in 1.2s. ..." or "... try again in 20ms ...".
pub(super) fn stated_in_message(message: &str) -> Option<u64> {
    let at = message.find("try again in ")? + "try again in ".len();
    let word = message[at..].split(|c: char| c.is_whitespace() || c == ',').next()?;
    go_duration(word.trim_end_matches('.'))
}

/// The time from `now` to the next midnight of US Pacific standard time
/// (08:00 UTC), when Google resets a project's per-day quotas. Under
/// daylight saving the reset is an hour earlier, so this waits at most an
/// hour longer than needed and never retries before the reset.
pub(super) fn until_pacific_midnight(now: SystemTime) -> u64 {
    const DAY: u64 = 86_400;
    const RESET: u64 = 8 * 3600;
    let secs = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    let into_day = (secs + DAY - RESET) % DAY;
    nanos(u128::from(DAY - into_day) * 1_000_000_000)
}

/// The time from `now` to 00:00 UTC on the first day of the next month,
/// when Anthropic lifts a usage tier's monthly spend limit (at most the
/// 30 days an outcome may wait).
pub(super) fn until_next_month(now: SystemTime) -> u64 {
    const DAY: u64 = 86_400;
    let secs = now.duration_since(SystemTime::UNIX_EPOCH).unwrap_or(Duration::ZERO).as_secs();
    let (year, month) = civil_month(secs / DAY);
    let (year, month) = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
    let first = days_from_civil(year, month) * DAY;
    nanos(u128::from(first.saturating_sub(secs)) * 1_000_000_000)
}

/// The (year, month) of a day counted from 1970-01-01 (Hinnant's
/// civil-from-days, for days since the epoch).
fn civil_month(days: u64) -> (u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month)
}

/// Days from 1970-01-01 to the first of `month` in `year` (Hinnant's
/// days-from-civil).
fn days_from_civil(year: u64, month: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn nanos(ns: u128) -> u64 {
    u64::try_from(ns).unwrap_or(u64::MAX).min(MAX_RETRY_AFTER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use repute_core::SECOND;

    /// Tue, 14 Nov 2023 22:13:20 GMT.
    fn now() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000)
    }

    #[test]
    fn a_monthly_limit_lifts_on_the_first_of_the_next_month() {
        // 14 Nov 2023 22:13:20 UTC to 1 Dec 2023 00:00 UTC.
        assert_eq!(until_next_month(now()), (16 * 86_400 + 6_400) * SECOND);
        // December rolls into January; the last second of a month waits one.
        let dec = SystemTime::UNIX_EPOCH + Duration::from_secs(1_703_980_800); // 31 Dec 2023 00:00
        assert_eq!(until_next_month(dec), 86_400 * SECOND);
        let feb = SystemTime::UNIX_EPOCH + Duration::from_secs(1_709_251_199); // 29 Feb 2024 23:59:59
        assert_eq!(until_next_month(feb), SECOND);
        // From the start of a 31-day month the wait is capped at 30 days.
        let jan = SystemTime::UNIX_EPOCH + Duration::from_secs(1_704_067_200); // 1 Jan 2024 00:00
        assert_eq!(until_next_month(jan), MAX_RETRY_AFTER);
    }

    #[test]
    fn retry_after_takes_seconds_or_an_http_date() {
        assert_eq!(retry_after_value("Tue, 14 Nov 2023 22:14:05 GMT", now()), Some(45 * SECOND));
        assert_eq!(retry_after_value("Tue, 14 Nov 2023 22:00:00 GMT", now()), Some(0));
        assert_eq!(retry_after_value(" 12 ", now()), Some(12 * SECOND));
        assert_eq!(retry_after_value("soon", now()), None);
        assert_eq!(retry_after_value("-5", now()), None);
        assert_eq!(retry_after_value("99999999999999999999", now()), Some(MAX_RETRY_AFTER));
    }

    #[test]
    fn go_durations_as_openai_writes_them() {
        assert_eq!(go_duration("1s"), Some(SECOND));
        assert_eq!(go_duration("6m0s"), Some(360 * SECOND));
        assert_eq!(go_duration("20ms"), Some(20_000_000));
        assert_eq!(go_duration("1.5s"), Some(1_500_000_000));
        assert_eq!(go_duration("1h2m3s"), Some(3723 * SECOND));
        assert_eq!(go_duration("7"), None);
        assert_eq!(go_duration("3 days"), None);
        assert_eq!(go_duration(""), None);
    }

    #[test]
    fn rfc3339_instants_become_waits() {
        assert_eq!(instant("2023-11-14T22:13:50Z", now()), Some(30 * SECOND));
        assert_eq!(instant("2023-11-14T22:13:20.5Z", now()), Some(SECOND / 2));
        assert_eq!(instant("2023-11-14T22:00:00Z", now()), Some(0));
        assert_eq!(instant("tomorrow", now()), None);
    }

    #[test]
    fn a_message_states_its_delay() {
        let m = "Rate limit reached for gpt-4o on requests per min (RPM): Limit 3, Used 3, Requested 1. \
                 Please try again in 20s. Visit https://platform.openai.com/account/rate-limits.";
        assert_eq!(stated_in_message(m), Some(20 * SECOND));
        assert_eq!(stated_in_message("Please try again in 1.2s."), Some(1_200_000_000));
        assert_eq!(stated_in_message("Please try again later."), None);
    }

    #[test]
    fn pacific_midnight_is_eight_utc() {
        // 22:13:20 UTC: 9 h 46 min 40 s to 08:00 UTC.
        assert_eq!(until_pacific_midnight(now()), (9 * 3600 + 46 * 60 + 40) * SECOND);
        let at_reset = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 - 22 * 3600 - 800 + 8 * 3600);
        assert_eq!(until_pacific_midnight(at_reset), 86_400 * SECOND);
    }
}
