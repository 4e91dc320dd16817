//! The parts of libuv the link needs (Node exports them to addons), and the
//! callbacks libuv makes into it on the JS thread.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::rc::Rc;

use napi::sys;

use super::Link;

pub(super) type Handle = c_void;
pub(super) type PollCb = unsafe extern "C" fn(*mut Handle, c_int, c_int);
pub(super) type CloseCb = unsafe extern "C" fn(*mut Handle);

pub(super) const POLL: c_int = 8;
pub(super) const READABLE: c_int = 1;
pub(super) const WRITABLE: c_int = 2;

extern "C" {
    pub(super) fn uv_handle_size(kind: c_int) -> usize;
    pub(super) fn uv_poll_init_socket(lp: *mut napi::sys::uv_loop_s, handle: *mut Handle, socket: c_int) -> c_int;
    pub(super) fn uv_poll_start(handle: *mut Handle, events: c_int, cb: PollCb) -> c_int;
    pub(super) fn uv_close(handle: *mut Handle, cb: CloseCb);
    pub(super) fn uv_ref(handle: *mut Handle);
    pub(super) fn uv_unref(handle: *mut Handle);
    pub(super) fn uv_strerror(err: c_int) -> *const std::ffi::c_char;
}

/// The size libuv needs for a poll handle.
pub(super) fn handle_layout() -> std::alloc::Layout {
    // SAFETY: a pure query of a constant.
    let size = unsafe { uv_handle_size(POLL) };
    std::alloc::Layout::from_size_align(size, 16).expect("libuv's handle size is small")
}

/// libuv calls this on the JS thread when the socket is ready.
pub(super) unsafe extern "C" fn on_poll(handle: *mut Handle, status: c_int, events: c_int) {
    let link = &*(*(handle as *mut *const RefCell<Link>));
    let (env, context) = {
        let l = link.borrow();
        (l.env, l.context)
    };
    let mut handles = ptr::null_mut();
    if sys::napi_open_handle_scope(env, &mut handles) != sys::Status::napi_ok {
        return;
    }
    let mut resource = ptr::null_mut();
    let mut scope = ptr::null_mut();
    let scoped = sys::napi_create_object(env, &mut resource) == sys::Status::napi_ok
        && sys::napi_open_callback_scope(env, resource, context, &mut scope) == sys::Status::napi_ok;
    {
        let mut l = link.borrow_mut();
        if let Err(e) = l.ready(status, events) {
            l.lost(&e);
        }
        l.keep_alive();
    }
    // Closing the callback scope runs the promise reactions, which may call
    // back into the link: nothing of it is borrowed here.
    if scoped {
        sys::napi_close_callback_scope(env, scope);
    }
    sys::napi_close_handle_scope(env, handles);
}

/// libuv calls this once a closed handle is done with.
pub(super) unsafe extern "C" fn on_close(handle: *mut Handle) {
    drop(Rc::from_raw(*(handle as *mut *const RefCell<Link>)));
    std::alloc::dealloc(handle as *mut u8, handle_layout());
}
