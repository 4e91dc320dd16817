//! Acquire and release on the JS event loop for a pool on Redis: the host's
//! `Exchange` turns them into script calls and the replies into leases,
//! and `index.js` moves the bytes over a `net.Socket` it owns. An acquire
//! then costs the event loop one wake-up, for its reply, and no thread
//! hop, and no call here waits on the network.

use napi::bindgen_prelude::{BigInt, BufferSlice, ToNapiValue, TypeName, ValueType};
use napi::{check_status, sys};
use napi_derive::napi;
use repute_host::providers::{Address, Done};
use repute_host::{Error, StoreError};

use crate::errors::{invalid, to_js, OrThrow};
use crate::pool::{u64_arg, NativePool};
use crate::views::LeaseData;

/// Where the pool's Redis listens: `host` and `port`, or a unix socket `path`.
#[napi(object, object_from_js = false)]
pub struct WireAddress {
    pub host: Option<String>,
    pub port: Option<u32>,
    pub path: Option<String>,
}

/// A finished acquire (`lease`) or release, or why it failed (`error`, a
/// payload `index.js` turns into a typed error).
pub struct WireDone {
    op: u32,
    lease: Option<LeaseData>,
    error: Option<String>,
}

/// Slots per finished operation in a [`WireFed`].
const SLOTS: usize = 13;

/// What a read led to, as one flat array: the command to write next (or
/// null), then per finished operation `op`, the error payload or null,
/// and, for a granted lease, its fields in `LeaseData` order (left empty
/// for a release). `index.js` builds each lease with one object literal:
/// objects defined here through N-API cost more than the rest of the
/// acquire together.
pub struct WireFed {
    write: Option<String>,
    done: Vec<WireDone>,
}

impl TypeName for WireFed {
    fn type_name() -> &'static str {
        "Array<unknown>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for WireFed {
    unsafe fn to_napi_value(env: sys::napi_env, fed: Self) -> napi::Result<sys::napi_value> {
        let mut array = std::ptr::null_mut();
        check_status!(sys::napi_create_array_with_length(env, 1 + SLOTS * fed.done.len(), &mut array))?;
        let set = |index: usize, value: sys::napi_value| -> napi::Result<()> {
            check_status!(sys::napi_set_element(env, array, index as u32, value))
        };
        set(0, ToNapiValue::to_napi_value(env, fed.write)?)?;
        for (i, done) in fed.done.into_iter().enumerate() {
            let at = 1 + SLOTS * i;
            set(at, ToNapiValue::to_napi_value(env, done.op)?)?;
            set(at + 1, ToNapiValue::to_napi_value(env, done.error)?)?;
            let Some(l) = done.lease else { continue };
            set(at + 2, ToNapiValue::to_napi_value(env, l.id)?)?;
            set(at + 3, ToNapiValue::to_napi_value(env, l.token)?)?;
            set(at + 4, ToNapiValue::to_napi_value(env, l.kind)?)?;
            set(at + 5, ToNapiValue::to_napi_value(env, l.value)?)?;
            set(at + 6, ToNapiValue::to_napi_value(env, l.context)?)?;
            set(at + 7, ToNapiValue::to_napi_value(env, l.permit)?)?;
            set(at + 8, ToNapiValue::to_napi_value(env, l.lease_kind)?)?;
            set(at + 9, ToNapiValue::to_napi_value(env, l.granted_at_ms)?)?;
            set(at + 10, ToNapiValue::to_napi_value(env, l.expires_at_ms)?)?;
            set(at + 11, ToNapiValue::to_napi_value(env, l.ttl_ms)?)?;
            set(at + 12, ToNapiValue::to_napi_value(env, l.deadline_ms)?)?;
        }
        Ok(array)
    }
}

fn no_wire() -> napi::Error {
    to_js(invalid("pool", "has no Redis connection of its own"))
}

/// Commands as a string: `socket.write` encodes it straight into the
/// socket's buffer, where a Buffer made here would cost an external
/// allocation and a finalizer each. Every byte written is UTF-8: commands
/// are ASCII apart from resource names, which are strings.
fn text(out: Vec<u8>) -> napi::Result<String> {
    String::from_utf8(out).map_err(|_| napi::Error::from_reason("a Redis command was not UTF-8"))
}

#[napi]
impl NativePool {
    /// Where to connect, when this pool's acquires and releases run on the
    /// caller's event loop; null when they run as ordinary calls.
    #[napi]
    pub fn wire_address(&self) -> Option<WireAddress> {
        let exchange = self.exchange.borrow();
        exchange.as_ref().map(|x| match x.address() {
            Address::Tcp { host, port } => {
                WireAddress { host: Some(host.clone()), port: Some(u32::from(*port)), path: None }
            }
            Address::Unix(path) => WireAddress { host: None, port: None, path: Some(path.display().to_string()) },
        })
    }

    /// Starts acquire `op`; returns the bytes to write. Refusals the pool
    /// knows at once (nothing selectable, rate limited) are thrown here.
    #[napi]
    pub fn wire_acquire(&self, op: u32, context: String) -> napi::Result<String> {
        let mut exchange = self.exchange.borrow_mut();
        let x = exchange.as_mut().ok_or_else(no_wire)?;
        self.shared.with(|p| x.acquire(p, op, &context))?;
        text(x.take_output())
    }

    /// Starts release `op`: the lease ends in the pool now. Returns the
    /// revoke to write, or null when the release is already complete.
    #[napi]
    pub fn wire_release(&self, op: u32, id: BigInt, token: BigInt) -> napi::Result<Option<String>> {
        let (id, token) = (u64_arg("id", &id).or_throw()?, u64_arg("token", &token).or_throw()?);
        let mut exchange = self.exchange.borrow_mut();
        let x = exchange.as_mut().ok_or_else(no_wire)?;
        let sent = self.shared.with(|p| x.release(p, op, id, token))?;
        if sent {
            text(x.take_output()).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Bytes read from the connection. Throws when the connection is no
    /// longer usable: the caller closes it and calls `wireReset`.
    #[napi]
    pub fn wire_feed(&self, data: BufferSlice<'_>) -> napi::Result<WireFed> {
        let mut exchange = self.exchange.borrow_mut();
        let x = exchange.as_mut().ok_or_else(no_wire)?;
        let done = self.shared.with(|p| x.feed(p, &data).map_err(Error::Store))?;
        let out = x.take_output();
        let write = if out.is_empty() { None } else { Some(text(out)?) };
        Ok(WireFed { write, done: done.into_iter().map(|d| self.finished(d)).collect() })
    }

    /// After the connection closed: every operation in flight fails with
    /// `reason` (answered like `wireFeed`), and the next connection starts afresh.
    #[napi]
    pub fn wire_reset(&self, reason: String) -> WireFed {
        let mut exchange = self.exchange.borrow_mut();
        let why = StoreError::Unavailable(format!("redis: {reason}"));
        let done = exchange.as_mut().map(|x| x.reset(&why)).unwrap_or_default();
        WireFed { write: None, done: done.into_iter().map(|d| self.finished(d)).collect() }
    }
}

impl NativePool {
    fn finished(&self, done: Done) -> WireDone {
        let (op, result) = match done {
            Done::Acquired { op, result } => (op, result.map(|l| Some(self.shared.lease_data(&l, l.granted_at)))),
            Done::Released { op, result } => (op, result.map(|()| None)),
        };
        match result {
            Ok(lease) => WireDone { op, lease, error: None },
            Err(e) => WireDone { op, lease: None, error: Some(to_js(e).reason) },
        }
    }
}
