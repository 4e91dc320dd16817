//! The tenant's grant and revoke scripts as bytes, for a caller that owns
//! the Redis connection and must not wait on it (Node's event loop): it
//! writes what [`Exchange`] gives it and feeds back what it reads. The
//! scripts, keys and rules are the ones [`RedisFencing`](super::RedisFencing)
//! runs; only who moves the bytes differs. One connection keeps commands in
//! order, so a revoke written before a grant runs before it.

use std::collections::VecDeque;

use redis::{ConnectionAddr, ConnectionInfo};
use repute_core::{GrantAnswer, Lease, Selector};

use super::resp::{broken, bulk, digits, number, permit_key, reply, Reply};
use super::scripts::{GENERATION, GRANT, NOW, PRELUDE, REVOKE};
use super::{grant_answer, grant_call, script_error, Keys};
use crate::error::{selector_error, Error, Result, StoreError};
use crate::pool::Pool;
use crate::providers::Permit;
use crate::two_phase::{InFlight, Proposal, Revoke, Step};

/// Where the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    pub host: String,
    pub port: u16,
}

/// One script: run by hash, or by its source after the server lost it.
#[derive(Debug, Clone)]
struct Source {
    sha: String,
    text: String,
}

impl Source {
    fn new(text: String) -> Source {
        Source { sha: redis::Script::new(&text).get_hash().to_owned(), text }
    }

    /// The start of a call with `args` arguments in all, `keys` of them keys.
    fn head(&self, out: &mut Vec<u8>, by_source: bool, args: u64, keys: u64) {
        out.push(b'*');
        out.extend_from_slice(digits(args, &mut [0; 20]));
        out.extend_from_slice(b"\r\n");
        bulk(out, &[if by_source { b"EVAL" } else { b"EVALSHA" }]);
        bulk(out, &[if by_source { self.text.as_bytes() } else { self.sha.as_bytes() }]);
        number(out, keys);
    }
}

/// A tenant's permits on one Redis server, as commands.
#[derive(Debug, Clone)]
pub struct RedisWire {
    address: Address,
    /// AUTH and SELECT, each answered `+OK`.
    handshake: Vec<redis::Cmd>,
    keys: Keys,
    epoch: u64,
    grant: Source,
    revoke: Source,
}

impl RedisWire {
    /// `None` unless the server is on plain TCP (a TLS server needs more
    /// than the caller's socket).
    pub(super) fn new(info: &ConnectionInfo, keys: Keys, epoch: u64) -> Option<RedisWire> {
        let ConnectionAddr::Tcp(host, port) = info.addr() else { return None };
        let address = Address { host: host.clone(), port: *port };
        let settings = info.redis_settings();
        let mut handshake = Vec::new();
        if let Some(password) = settings.password() {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = settings.username() {
                auth.arg(user);
            }
            handshake.push(auth.arg(password).clone());
        }
        if settings.db() != 0 {
            handshake.push(redis::cmd("SELECT").arg(settings.db()).clone());
        }
        Some(RedisWire {
            address,
            handshake,
            keys,
            epoch,
            grant: Source::new(format!("{PRELUDE}{NOW}{GENERATION}{GRANT}")),
            revoke: Source::new(format!("{PRELUDE}{REVOKE}")),
        })
    }

    pub fn address(&self) -> &Address {
        &self.address
    }

    /// EVALSHA (or EVAL) of the grant script for `p`, with its claim,
    /// appended to `out`.
    fn grant(&self, out: &mut Vec<u8>, p: &Proposal, by_source: bool) {
        let permit = Permit { kind: p.resource().kind(), value: p.resource().value(), index: p.permit() };
        let claim = p.claim();
        let (keys, args) = grant_call(&self.keys, permit, p.ttl(), p.last(), self.epoch, claim.as_ref(), p.view());
        self.grant.head(out, by_source, 3 + (keys.len() + args.len()) as u64, keys.len() as u64);
        for key in &keys {
            bulk(out, &[key.as_bytes()]);
        }
        for arg in args {
            number(out, arg);
        }
    }

    /// The revoke script for `r`, appended to `out`.
    fn revoke(&self, out: &mut Vec<u8>, r: &Revoke, by_source: bool) {
        let permit = Permit { kind: r.resource.kind(), value: r.resource.value(), index: r.permit };
        self.revoke.head(out, by_source, 8, 2);
        permit_key(out, &self.keys, "lease:", permit);
        bulk(out, &[self.keys.waiting.as_bytes()]);
        number(out, r.token);
        bulk(out, &[self.keys.wake.as_bytes()]);
        number(out, self.keys.pool);
    }
}

/// What the caller waits for, in the order its commands were written.
#[derive(Debug)]
enum Waiting {
    Handshake,
    Grant {
        op: u32,
        context: String,
        /// What the acquire may choose: the next candidate after a refusal too.
        selector: Selector,
        /// Boxed: a proposal with its claim outweighs every other wait.
        proposal: Box<Proposal>,
        by_source: bool,
    },
    /// `op` is none for the revoke of a token a settle refused.
    Revoke {
        op: Option<u32>,
        revoke: Revoke,
        by_source: bool,
    },
}

/// A finished operation of the caller's.
#[derive(Debug)]
pub enum Done {
    Acquired { op: u32, result: Result<Lease> },
    Released { op: u32, result: Result<()> },
}

/// The acquires and releases in flight on one connection: commands out,
/// replies in, the pool settled as answers arrive.
#[derive(Debug)]
pub struct Exchange {
    wire: RedisWire,
    waiting: VecDeque<Waiting>,
    /// The permits of the grants in `waiting`.
    in_flight: InFlight,
    input: Vec<u8>,
    output: Vec<u8>,
}

impl Exchange {
    /// A fresh connection: the handshake is the first thing to write.
    pub fn new(wire: RedisWire) -> Exchange {
        let mut x = Exchange {
            wire,
            waiting: VecDeque::new(),
            in_flight: InFlight::default(),
            input: Vec::new(),
            output: Vec::new(),
        };
        x.handshake();
        x
    }

    fn handshake(&mut self) {
        for cmd in &self.wire.handshake {
            self.output.extend_from_slice(&cmd.get_packed_command());
            self.waiting.push_back(Waiting::Handshake);
        }
    }

    pub fn address(&self) -> &Address {
        self.wire.address()
    }

    /// Bytes to write, in order.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.output)
    }

    /// Whether replies are still due.
    pub fn busy(&self) -> bool {
        !self.waiting.is_empty()
    }

    /// Starts an acquire among the resources `selector` admits: refusals
    /// the pool knows at once (nothing selectable, the rate limit, a bad
    /// selector, named as [`selector_error`] names it) come back here, the
    /// rest as `Done`.
    pub fn acquire(&mut self, pool: &mut Pool, op: u32, context: &str, selector: &Selector) -> Result<()> {
        let proposal = pool.propose(context, selector, &self.in_flight).map_err(selector_error)?;
        self.send_grant(op, context.to_owned(), selector.clone(), Box::new(proposal), false);
        Ok(())
    }

    /// Starts a release: the lease ends in the pool at once. True when a
    /// revoke went out and the release is `Done` once it ran; false when
    /// there was nothing to revoke.
    pub fn release(&mut self, pool: &mut Pool, op: u32, id: u64, token: u64) -> Result<bool> {
        match pool.release_deferred(id, token)? {
            Some(revoke) => {
                self.send_revoke(Some(op), revoke, false);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn send_grant(&mut self, op: u32, context: String, selector: Selector, proposal: Box<Proposal>, by_source: bool) {
        self.wire.grant(&mut self.output, &proposal, by_source);
        self.in_flight.add(&proposal);
        self.waiting.push_back(Waiting::Grant { op, context, selector, proposal, by_source });
    }

    fn send_revoke(&mut self, op: Option<u32>, revoke: Revoke, by_source: bool) {
        self.wire.revoke(&mut self.output, &revoke, by_source);
        self.waiting.push_back(Waiting::Revoke { op, revoke, by_source });
    }

    /// Takes bytes read from the connection and settles what they answer.
    /// An error means the connection is unusable: drop it and `reset`.
    pub fn feed(&mut self, pool: &mut Pool, bytes: &[u8]) -> std::result::Result<Vec<Done>, StoreError> {
        self.input.extend_from_slice(bytes);
        let mut done = Vec::new();
        let mut used = 0;
        while let Some((reply, len)) = reply(&self.input[used..])? {
            used += len;
            let waiting = self.waiting.pop_front().ok_or_else(|| broken("a reply nobody waited for"))?;
            self.answer(pool, waiting, reply, &mut done)?;
        }
        self.input.drain(..used);
        Ok(done)
    }

    fn answer(
        &mut self,
        pool: &mut Pool,
        waiting: Waiting,
        reply: Reply,
        done: &mut Vec<Done>,
    ) -> std::result::Result<(), StoreError> {
        let lost_script = matches!(&reply, Reply::Error(e) if e.starts_with("NOSCRIPT"));
        match waiting {
            Waiting::Handshake => match reply {
                Reply::Status => {}
                other => return Err(broken(format!("the handshake was answered {other:?}"))),
            },
            Waiting::Grant { op, context, selector, proposal, by_source: false } if lost_script => {
                self.in_flight.remove(&proposal);
                self.send_grant(op, context, selector, proposal, true);
            }
            Waiting::Grant { op, context, selector, proposal, .. } => {
                self.in_flight.remove(&proposal);
                let answer = match reply {
                    Reply::Int(n) => grant_answer(Some(n)),
                    Reply::Nil => grant_answer(None),
                    Reply::Error(e) => {
                        done.push(Done::Acquired { op, result: Err(Error::Store(script_error(&e))) });
                        return Ok(());
                    }
                    other => return Err(broken(format!("a grant was answered {other:?}"))),
                };
                match pool.settle(&context, &selector, &proposal, answer, &self.in_flight) {
                    Ok(Step::Granted(lease)) => done.push(Done::Acquired { op, result: Ok(lease) }),
                    Ok(Step::Next(next)) => self.send_grant(op, context, selector, next, false),
                    Err(e) => {
                        if let GrantAnswer::Granted(token) = answer {
                            let resource = proposal.resource().clone();
                            self.send_revoke(None, Revoke { resource, permit: proposal.permit(), token }, false);
                        }
                        done.push(Done::Acquired { op, result: Err(e) });
                    }
                }
            }
            Waiting::Revoke { op, revoke, by_source: false } if lost_script => self.send_revoke(op, revoke, true),
            Waiting::Revoke { op, .. } => {
                let result = match reply {
                    Reply::Error(e) => Err(Error::Store(broken(e))),
                    _ => Ok(()),
                };
                if let Some(op) = op {
                    done.push(Done::Released { op, result });
                }
            }
        }
        Ok(())
    }

    /// After the connection broke: every operation in flight fails with
    /// `why` (a grant the server may have run lapses at its TTL; a revoke
    /// that may not have run leaves its permit held until then), and the
    /// next connection starts with the handshake.
    pub fn reset(&mut self, why: &StoreError) -> Vec<Done> {
        self.input.clear();
        self.output.clear();
        self.in_flight = InFlight::default();
        let failed = self
            .waiting
            .drain(..)
            .filter_map(|w| match w {
                Waiting::Grant { op, .. } => Some(Done::Acquired { op, result: Err(Error::Store(why.clone())) }),
                Waiting::Revoke { op: Some(op), .. } => {
                    Some(Done::Released { op, result: Err(Error::Store(why.clone())) })
                }
                _ => None,
            })
            .collect();
        self.handshake();
        failed
    }
}

#[cfg(test)]
mod tests {
    use super::super::{claim_args, context_args};
    use super::*;
    use repute_core::ResourceId;

    fn wire() -> RedisWire {
        let info = redis::Client::open("redis://127.0.0.1:1/").unwrap().get_connection_info().clone();
        RedisWire::new(&info, Keys::new("t"), 7).unwrap()
    }

    #[test]
    fn commands_are_the_ones_the_redis_crate_would_pack() {
        let wire = wire();
        let resource = ResourceId::new("proxy", "10.0.0.1:8080").unwrap();
        let revoke = Revoke { resource: resource.clone(), permit: 12, token: 1_234_567_890_123 };
        let permit = Permit { kind: "proxy", value: "10.0.0.1:8080", index: 12 };
        let (_, lease) = wire.keys.permit(permit);
        for by_source in [false, true] {
            let mut out = Vec::new();
            wire.revoke(&mut out, &revoke, by_source);
            let script = if by_source { &wire.revoke.text } else { &wire.revoke.sha };
            let verb = if by_source { "EVAL" } else { "EVALSHA" };
            let keys = &wire.keys;
            let packed = redis::cmd(verb)
                .arg(script)
                .arg(2)
                .arg(&lease)
                .arg(&keys.waiting)
                .arg(revoke.token)
                .arg(&keys.wake)
                .arg(keys.pool)
                .get_packed_command();
            assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(packed).unwrap());
        }
        assert_eq!(digits(0, &mut [0; 20]), b"0");
        assert_eq!(digits(u64::MAX, &mut [0; 20]), b"18446744073709551615");
    }

    #[test]
    fn a_grant_with_its_claim_is_the_command_the_redis_crate_would_pack() {
        use crate::bindings::repute::pool::types as wit;
        let wire = wire();
        let per_context = wit::ContextLimits { rpm: Some(5), tpm: Some(1_000), min_interval: Some(2_001) };
        let limits = wit::Limits {
            rpm: Some(60),
            tpm: None,
            rpd: None,
            tpd: None,
            min_interval: Some(1_500),
            max_uses: Some(9),
            max_age: None,
            per_context,
        };
        let permit = Permit { kind: "key", value: "k1", index: 3 };
        let (fence, lease) = wire.keys.permit(permit);
        for context in [None, Some("gpt")] {
            let inner = wit::Proposal {
                resource: wit::ResourceKey { slot: 0, serial: 1 },
                permit: 3,
                last: 41,
                ttl: 30_000_000_000,
                at: 0,
                refused: Vec::new(),
                fail_open: false,
                claim: Some(wit::Claim { limits, cost: 250, context: context.map(str::to_owned), groups: Vec::new() }),
                view: 5,
            };
            let proposal = Proposal { inner, resource: ResourceId::new("key", "k1").unwrap() };
            let mut out = Vec::new();
            wire.grant(&mut out, &proposal, false);
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(&wire.grant.sha).arg(15);
            cmd.arg(&wire.keys.epoch).arg(&fence).arg(&lease).arg(&wire.keys.usage(permit, None)[..]);
            // The context's scope, or the resource's again.
            cmd.arg(&wire.keys.usage(permit, context)[..]);
            cmd.arg(wire.keys.day(permit)).arg(wire.keys.claimed(permit));
            cmd.arg(&wire.keys.waiting).arg(&wire.keys.seq).arg(&wire.keys.generation).arg(&wire.keys.changed);
            // Counted: rpm 60, no tpm, 1.5 µs rounded up to 2, 9 uses, cost 250; permit 3.
            cmd.arg(30_000_000).arg(41).arg(7).arg(&[1u64, 60, 0, 2, 9, 250, 3][..]);
            // Per context: rpm 5, tpm 1000, 2.001 µs rounded up to 3; none without one.
            cmd.arg(&if context.is_some() { [1u64, 5, 1_000, 3] } else { [0; 4] }[..]);
            // No rpd, no tpd, no groups; the pool's name, the view.
            cmd.arg(&[0u64, 0, 0, wire.keys.pool, 5][..]);
            let packed = cmd.get_packed_command();
            assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(packed).unwrap(), "{context:?}");
        }
    }

    #[test]
    fn a_claim_counted_per_context_alone_leaves_the_resource_scope_out() {
        use repute_core::{Claim, Context, ContextLimits, Limits};
        let limits =
            Limits { per_context: ContextLimits { rpm: Some(2), ..ContextLimits::default() }, ..Limits::default() };
        let claim = Claim { limits, cost: 1, context: Some(Context::new("gpt").unwrap()), groups: Vec::new() };
        assert_eq!(claim_args(Some(&claim)), [0, 0, 0, 0, 0, 1]);
        assert_eq!(context_args(Some(&claim)), Some(("gpt", [2, 0, 0])));
        assert_eq!((claim_args(None), context_args(None)), ([0; 6], None));
    }

    #[test]
    fn grant_replies_are_the_answers_the_script_documents() {
        assert_eq!(grant_answer(Some(7)), GrantAnswer::Granted(7));
        assert_eq!(grant_answer(None), GrantAnswer::Held);
        assert_eq!(grant_answer(Some(0)), GrantAnswer::Limited(None));
        assert_eq!(grant_answer(Some(-16 * 2_500_000)), GrantAnswer::Limited(Some(2_500_000_000)));
        assert_eq!(grant_answer(Some(-(16 * 2_500_000 + 1))), GrantAnswer::ContextLimited(2_500_000_000));
        assert_eq!(grant_answer(Some(-17)), GrantAnswer::ContextLimited(1_000));
        assert_eq!(grant_answer(Some(-(16 * 3 + 2 + 4))), GrantAnswer::GroupLimited(4, 3_000));
        assert_eq!(grant_answer(Some(-1)), GrantAnswer::Stale);
    }

    #[test]
    fn a_recovering_store_is_told_apart_from_a_broken_one() {
        assert_eq!(script_error("RECOVERING 1500"), StoreError::Recovering { retry_after: 1_500_000 });
        assert_eq!(script_error("RECOVERING soon"), StoreError::Unavailable("redis: RECOVERING soon".into()));
        assert_eq!(script_error("ERR 1500"), StoreError::Unavailable("redis: ERR 1500".into()));
    }
}
