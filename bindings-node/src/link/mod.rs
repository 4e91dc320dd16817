//! A pool's own Redis connection on Node's event loop. The socket is
//! watched by a libuv poll handle on the JS thread's loop: an acquire
//! writes its grant and returns a promise, and when the reply arrives the
//! loop wakes this code, which reads it, settles the pool and resolves the
//! promise. Nothing waits on the network, no thread is involved, and no
//! JavaScript stream sits between the socket and the pool. The host's
//! `Exchange` decides what is written and what the replies mean.
//!
//! Everything here runs on the JS thread: the calls from `lib/pool.js`, the
//! poll callback and the close callback.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_int;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::ptr;
use std::rc::Rc;
use std::sync::Arc;

use napi::bindgen_prelude::{ToNapiValue, TypeName, ValueType};
use napi::{check_status, sys};
use repute_host::providers::{Address, Done, Exchange};
use repute_host::{Error, Holder, Pool, Selector, StoreError};
use socket2::{Domain, SockAddr, Socket, Type};

use crate::errors::{to_js, to_js_value, OrThrow};
use crate::lease::NativeLease;

mod slot;
mod uv;

pub(crate) use slot::LinkSlot;
use uv::{handle_layout, on_close, on_poll};

/// Where the server listens, resolved when the pool opened (off the JS
/// thread for `Pool.open`), so connecting never waits on a name lookup.
#[derive(Debug, Clone)]
pub(crate) struct Target(SocketAddr);

impl Target {
    pub(crate) fn resolve(address: &Address) -> Result<Target, Error> {
        let unresolved = |why: String| Error::Store(broken(format!("resolving {}: {why}", address.host)));
        let mut addrs =
            (address.host.as_str(), address.port).to_socket_addrs().map_err(|e| unresolved(e.to_string()))?;
        addrs.next().map(Target).ok_or_else(|| unresolved("no address".into()))
    }
}

/// One socket and the poll handle that watches it.
struct Conn {
    socket: Socket,
    handle: *mut uv::Handle,
    /// Until the non-blocking connect finished.
    connecting: bool,
    /// Bytes the socket did not take yet, in order.
    unsent: Vec<u8>,
    /// The events the handle watches now.
    watching: c_int,
}

pub(crate) struct Link {
    env: sys::napi_env,
    /// For the callback scope the poll callback runs promise reactions in.
    context: sys::napi_async_context,
    holder: Arc<Holder>,
    exchange: Exchange,
    target: Target,
    conn: Option<Conn>,
    /// The promise of each operation still waiting for a reply.
    waiting: HashMap<u32, sys::napi_deferred>,
    next_op: u32,
    closed: bool,
}

/// A promise made here, handed to JavaScript as is.
pub struct Promised(sys::napi_value);

impl TypeName for Promised {
    fn type_name() -> &'static str {
        "Promise<unknown>"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

impl ToNapiValue for Promised {
    unsafe fn to_napi_value(_: sys::napi_env, promised: Self) -> napi::Result<sys::napi_value> {
        Ok(promised.0)
    }
}

fn broken(what: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("redis: {what}"))
}

fn uv_error(call: &str, code: c_int) -> StoreError {
    // SAFETY: libuv returns a static NUL-terminated string for any code.
    let text = unsafe { std::ffi::CStr::from_ptr(uv::uv_strerror(code)) };
    broken(format!("{call}: {}", text.to_string_lossy()))
}

impl Link {
    pub(crate) fn new(
        env: sys::napi_env,
        holder: Arc<Holder>,
        exchange: Exchange,
        target: Target,
    ) -> napi::Result<Rc<RefCell<Link>>> {
        let mut context = ptr::null_mut();
        // SAFETY: called on the JS thread with its env; the name is a fresh
        // string and the resource may be null.
        unsafe {
            let mut name = ptr::null_mut();
            check_status!(sys::napi_create_string_utf8(env, c"repute.redis".as_ptr(), 12, &mut name))?;
            check_status!(sys::napi_async_init(env, ptr::null_mut(), name, &mut context))?;
        }
        Ok(Rc::new(RefCell::new(Link {
            env,
            context,
            holder,
            exchange,
            target,
            conn: None,
            waiting: HashMap::new(),
            next_op: 0,
            closed: false,
        })))
    }

    fn op(&mut self) -> u32 {
        self.next_op = self.next_op.wrapping_add(1);
        self.next_op
    }

    fn promise(&mut self, op: u32) -> napi::Result<Promised> {
        let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
        // SAFETY: on the JS thread, inside a call from JavaScript.
        check_status!(unsafe { sys::napi_create_promise(self.env, &mut deferred, &mut promise) })?;
        self.waiting.insert(op, deferred);
        Ok(Promised(promise))
    }

    /// A new operation: `f` starts it in the exchange with the pool.
    fn begin<T>(
        &mut self,
        f: impl FnOnce(&mut Exchange, &mut Pool, u32) -> Result<T, Error>,
    ) -> napi::Result<(u32, T)> {
        if self.closed {
            return Err(to_js(Error::Closed));
        }
        let op = self.op();
        let exchange = &mut self.exchange;
        let started = self.holder.with(|p| f(exchange, p, op)).or_throw()?;
        Ok((op, started))
    }

    /// Starts an acquire; refusals the pool knows at once are thrown.
    pub(crate) fn acquire(this: &Rc<RefCell<Link>>, context: &str, selector: &Selector) -> napi::Result<Promised> {
        let mut link = this.borrow_mut();
        let (op, ()) = link.begin(|x, p, op| x.acquire(p, op, context, selector))?;
        let promise = link.promise(op)?;
        link.send(this);
        Ok(promise)
    }

    /// Ends the lease in the pool now; the promise resolves once the
    /// revoke ran (at once when there is nothing to revoke).
    pub(crate) fn release(this: &Rc<RefCell<Link>>, lease: &NativeLease) -> napi::Result<Promised> {
        let mut link = this.borrow_mut();
        if link.closed {
            return Err(to_js(Error::Closed));
        }
        let op = link.op();
        let exchange = &mut link.exchange;
        let (_, sent) = lease.held().release_by(|p, l| exchange.release(p, op, l.id, l.token)).or_throw()?;
        let promise = link.promise(op)?;
        if sent == Some(true) {
            link.send(this);
        } else {
            link.finish(vec![Done::Released { op, result: Ok(()) }]);
        }
        Ok(promise)
    }

    /// Writes what the exchange has for the server, connecting first if
    /// needed; a connection that fails fails what waits on it.
    fn send(&mut self, this: &Rc<RefCell<Link>>) {
        if let Err(e) = self.connect(this).and_then(|()| self.flush()) {
            self.lost(&e);
        }
        self.keep_alive();
    }

    fn connect(&mut self, this: &Rc<RefCell<Link>>) -> Result<(), StoreError> {
        if self.conn.is_some() {
            return Ok(());
        }
        let Target(addr) = self.target;
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None).map_err(broken)?;
        socket.set_tcp_nodelay(true).map_err(broken)?;
        socket.set_nonblocking(true).map_err(broken)?;
        let connecting = match socket.connect(&SockAddr::from(addr)) {
            Ok(()) => false,
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) || e.kind() == ErrorKind::WouldBlock => true,
            Err(e) => return Err(broken(e)),
        };
        let handle = self.watch(this, &socket)?;
        self.conn = Some(Conn { socket, handle, connecting, unsent: Vec::new(), watching: 0 });
        Ok(())
    }

    /// A poll handle on `socket`, holding a reference to this link until it is closed.
    fn watch(&self, this: &Rc<RefCell<Link>>, socket: &Socket) -> Result<*mut uv::Handle, StoreError> {
        use std::os::fd::AsRawFd;
        let mut lp = ptr::null_mut();
        // SAFETY: on the JS thread with its env.
        let status = unsafe { sys::napi_get_uv_event_loop(self.env, &mut lp) };
        if status != sys::Status::napi_ok {
            return Err(broken("no event loop"));
        }
        // SAFETY: the handle is allocated at libuv's size for a poll handle,
        // initialised before use, and freed only in its close callback.
        unsafe {
            let layout = handle_layout();
            let handle = std::alloc::alloc_zeroed(layout) as *mut uv::Handle;
            if handle.is_null() {
                std::alloc::handle_alloc_error(layout);
            }
            let code = uv::uv_poll_init_socket(lp, handle, socket.as_raw_fd());
            if code != 0 {
                std::alloc::dealloc(handle as *mut u8, layout);
                return Err(uv_error("uv_poll_init_socket", code));
            }
            // `data` is the first field of every libuv handle.
            *(handle as *mut *const RefCell<Link>) = Rc::into_raw(this.clone());
            Ok(handle)
        }
    }

    /// Writes what is pending and watches for what the connection needs next.
    fn flush(&mut self) -> Result<(), StoreError> {
        let out = self.exchange.take_output();
        let Some(conn) = self.conn.as_mut() else { return Ok(()) };
        conn.unsent.extend_from_slice(&out);
        if !conn.connecting {
            while !conn.unsent.is_empty() {
                match (&conn.socket).write(&conn.unsent) {
                    Ok(0) => return Err(broken("the connection took no bytes")),
                    Ok(n) => {
                        conn.unsent.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(broken(e)),
                }
            }
        }
        let wanted = uv::READABLE | if conn.connecting || !conn.unsent.is_empty() { uv::WRITABLE } else { 0 };
        if wanted != conn.watching {
            // SAFETY: the handle is initialised and open while `conn` holds it.
            let code = unsafe { uv::uv_poll_start(conn.handle, wanted, on_poll) };
            if code != 0 {
                return Err(uv_error("uv_poll_start", code));
            }
            conn.watching = wanted;
        }
        Ok(())
    }

    /// The process stays alive while a reply is due, and only then.
    fn keep_alive(&self) {
        if let Some(conn) = &self.conn {
            // SAFETY: the handle is initialised and open while `conn` holds it.
            unsafe {
                if self.waiting.is_empty() {
                    uv::uv_unref(conn.handle);
                } else {
                    uv::uv_ref(conn.handle);
                }
            }
        }
    }

    /// The socket is ready for `events`.
    fn ready(&mut self, status: c_int, events: c_int) -> Result<(), StoreError> {
        if status < 0 {
            return Err(uv_error("poll", status));
        }
        let Some(conn) = self.conn.as_mut() else { return Ok(()) };
        if conn.connecting && events & (uv::WRITABLE | uv::READABLE) != 0 {
            if let Some(e) = conn.socket.take_error().map_err(broken)? {
                return Err(broken(format!("connecting: {e}")));
            }
            conn.connecting = false;
        }
        if events & uv::READABLE != 0 {
            let mut buf = [0u8; 16 * 1024];
            loop {
                let Some(conn) = self.conn.as_ref() else { return Ok(()) };
                let n = match (&conn.socket).read(&mut buf) {
                    Ok(0) => return Err(broken("the server closed the connection")),
                    Ok(n) => n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(broken(e)),
                };
                let exchange = &mut self.exchange;
                let done = self.holder.with(|p| exchange.feed(p, &buf[..n]).map_err(Error::Store));
                self.finish(done.map_err(broken)?);
                if n < buf.len() {
                    break;
                }
            }
        }
        self.flush()
    }

    /// Settles the promises of finished operations.
    fn finish(&mut self, done: Vec<Done>) {
        for d in done {
            let (op, result) = match d {
                Done::Acquired { op, result } => (op, result.map(Some)),
                Done::Released { op, result } => (op, result.map(|()| None)),
            };
            let Some(deferred) = self.waiting.remove(&op) else { continue };
            // SAFETY: on the JS thread inside a handle scope (a call from
            // JavaScript, or the poll callback's); each deferred is settled once.
            unsafe {
                let settled = match result {
                    Ok(Some(lease)) => {
                        // The grant was proposed at `granted_at`, read before it was sent.
                        let sent = lease.granted_at;
                        let lease = NativeLease::new(self.holder.adopt(lease, sent));
                        ToNapiValue::to_napi_value(self.env, lease).and_then(|v| resolve(self.env, deferred, v))
                    }
                    Ok(None) => {
                        let mut undefined = ptr::null_mut();
                        check_status!(sys::napi_get_undefined(self.env, &mut undefined))
                            .and_then(|()| resolve(self.env, deferred, undefined))
                    }
                    Err(e) => to_js_value(self.env, e).and_then(|error| reject(self.env, deferred, error)),
                };
                // Nothing is left to tell: the promise could not be settled.
                drop(settled);
            }
        }
    }

    /// The connection is gone: every operation in flight fails, and the
    /// next one connects anew.
    fn lost(&mut self, why: &StoreError) {
        if let Some(conn) = self.conn.take() {
            // SAFETY: closing stops the watcher at once; the handle is freed,
            // with the link reference it holds, in the close callback.
            unsafe { uv::uv_close(conn.handle, on_close) };
            drop(conn.socket);
        }
        let failed = self.exchange.reset(why);
        self.finish(failed);
    }

    /// Lets go of the socket without settling anything.
    fn detach(&mut self) {
        if let Some(conn) = self.conn.take() {
            // SAFETY: as in `lost`.
            unsafe { uv::uv_close(conn.handle, on_close) };
        }
    }

    /// `pool.close()`: fails what is in flight and lets go of the socket.
    pub(crate) fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            self.lost(&broken("the pool was closed"));
            // SAFETY: the context was made by `napi_async_init` on this env.
            unsafe { sys::napi_async_destroy(self.env, self.context) };
        }
    }
}

unsafe fn resolve(env: sys::napi_env, deferred: sys::napi_deferred, value: sys::napi_value) -> napi::Result<()> {
    check_status!(sys::napi_resolve_deferred(env, deferred, value))
}

unsafe fn reject(env: sys::napi_env, deferred: sys::napi_deferred, error: sys::napi_value) -> napi::Result<()> {
    check_status!(sys::napi_reject_deferred(env, deferred, error))
}
