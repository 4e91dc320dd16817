//! RESP, Redis's protocol, as far as the wire needs it: commands written
//! straight into the output, without the strings and argument lists a
//! `redis::Cmd` would build for each (this is the hot path of every acquire
//! and release), and the replies read back.

use super::Keys;
use crate::error::StoreError;
use crate::providers::Permit;

pub(super) fn broken(what: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("redis: {what}"))
}

pub(super) fn bulk(out: &mut Vec<u8>, parts: &[&[u8]]) {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    out.push(b'$');
    out.extend_from_slice(digits(len as u64, &mut [0; 20]));
    out.extend_from_slice(b"\r\n");
    for part in parts {
        out.extend_from_slice(part);
    }
    out.extend_from_slice(b"\r\n");
}

pub(super) fn number(out: &mut Vec<u8>, n: u64) {
    bulk(out, &[digits(n, &mut [0; 20])]);
}

/// `n` in decimal, in the tail of `buf`.
pub(super) fn digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// The key `Keys::permit` names, written as one argument.
pub(super) fn permit_key(out: &mut Vec<u8>, keys: &Keys, which: &str, p: Permit<'_>) {
    let index = &mut [0; 20];
    let parts = [
        keys.prefix.as_bytes(),
        which.as_bytes(),
        p.kind.as_bytes(),
        "\u{1f}".as_bytes(),
        p.value.as_bytes(),
        "\u{1f}".as_bytes(),
        digits(u64::from(p.index), index),
    ];
    bulk(out, &parts);
}

/// A reply as far as the scripts and the handshake need it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Reply {
    Status,
    Int(i64),
    Nil,
    Error(String),
    Other,
}

/// The first reply in `buf` and its length; `None` while incomplete.
pub(super) fn reply(buf: &[u8]) -> std::result::Result<Option<(Reply, usize)>, StoreError> {
    let Some(end) = buf.windows(2).position(|w| w == b"\r\n") else { return Ok(None) };
    let line = std::str::from_utf8(&buf[1..end]).map_err(|_| broken("a reply line is not UTF-8"))?;
    let after = end + 2;
    let number = || line.parse::<i64>().map_err(|_| broken(format!("reply {line:?} is not a number")));
    Ok(Some(match buf[0] {
        b'+' => (Reply::Status, after),
        b'-' => (Reply::Error(line.to_owned()), after),
        b':' => (Reply::Int(number()?), after),
        b'_' => (Reply::Nil, after),
        b'$' => match number()? {
            -1 => (Reply::Nil, after),
            n if n >= 0 => {
                let total = after + n as usize + 2;
                if buf.len() < total {
                    return Ok(None);
                }
                (Reply::Other, total)
            }
            _ => return Err(broken("a negative bulk length")),
        },
        _ => return Err(broken(format!("an unexpected reply {:?}", buf[0] as char))),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_whole_or_not_at_all() {
        assert_eq!(reply(b":42\r\n").unwrap(), Some((Reply::Int(42), 5)));
        assert_eq!(reply(b"$-1\r\n:1\r\n").unwrap(), Some((Reply::Nil, 5)));
        assert_eq!(reply(b"_\r\n").unwrap(), Some((Reply::Nil, 3)));
        assert_eq!(reply(b"+OK\r\n").unwrap(), Some((Reply::Status, 5)));
        assert_eq!(
            reply(b"-NOSCRIPT No matching script\r\n").unwrap(),
            Some((Reply::Error("NOSCRIPT No matching script".into()), 30))
        );
        assert_eq!(reply(b"$3\r\nabc\r\n").unwrap(), Some((Reply::Other, 9)));
        for partial in [&b""[..], b":4", b":42\r", b"$3\r\nab", b"$3\r\nabc\r"] {
            assert_eq!(reply(partial).unwrap(), None, "{partial:?}");
        }
        assert!(reply(b"?x\r\n").is_err());
        assert!(reply(b":x\r\n").is_err());
    }
}
