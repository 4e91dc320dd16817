//! A pool's link as the pool holds it, and the pool's calls that run on it.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use napi::{sys, Env};
use napi_derive::napi;
use repute_host::providers::Exchange;
use repute_host::{Error, Holder, Selector};

use super::{Link, Promised, Target};
use crate::errors::{to_js, OrThrow};
use crate::lease::NativeLease;
use crate::pool::NativePool;
use crate::selector::SelectorSpec;

/// A pool's link: what it needs until first used, then the open link.
pub(crate) struct LinkSlot {
    pub(crate) ready: RefCell<Option<(Target, Exchange)>>,
    pub(crate) open: RefCell<Option<Rc<RefCell<Link>>>>,
}

// SAFETY: a pool crosses threads at most once, from `Pool.open`'s worker to
// the JS thread, before its link is opened; the `Rc` and the libuv handle
// behind `open` are made, used and dropped on the JS thread only.
unsafe impl Send for LinkSlot {}

impl LinkSlot {
    fn get(&self, env: sys::napi_env, holder: &Arc<Holder>) -> napi::Result<Rc<RefCell<Link>>> {
        if let Some(link) = self.open.borrow().as_ref() {
            return Ok(link.clone());
        }
        // `hasLink` was true, so only `close` can have taken it.
        let (target, exchange) = self.ready.borrow_mut().take().ok_or_else(|| to_js(Error::Closed))?;
        let link = Link::new(env, holder.clone(), exchange, target)?;
        *self.open.borrow_mut() = Some(link.clone());
        Ok(link)
    }

    pub(crate) fn close(&self) {
        self.ready.borrow_mut().take();
        if let Some(link) = self.open.borrow().as_ref() {
            link.borrow_mut().close();
        }
    }
}

impl Drop for LinkSlot {
    /// A pool collected without `close`: nothing waits on it (a waiting
    /// acquire keeps its pool reachable), so the socket just goes.
    fn drop(&mut self) {
        if let Some(link) = self.open.get_mut().take() {
            link.borrow_mut().detach();
        }
    }
}

#[napi]
impl NativePool {
    /// True when acquires and releases run on this pool's own Redis
    /// connection (`linkAcquire`, `linkRelease`).
    #[napi(getter)]
    pub fn has_link(&self) -> bool {
        self.link.ready.borrow().is_some() || self.link.open.borrow().is_some()
    }

    /// An acquire on the pool's connection among the resources `selector`
    /// admits: a promise of the lease. Refusals the pool knows at once are thrown.
    #[napi(ts_return_type = "Promise<NativeLease>")]
    pub fn link_acquire(&self, env: Env, context: String, selector: SelectorSpec) -> napi::Result<Promised> {
        let link = self.link.get(env.raw(), &self.holder)?;
        Link::acquire(&link, &context, &Selector::try_from(selector).or_throw()?)
    }

    /// A release: the lease ends in the pool now; the promise resolves once
    /// Redis ran the revoke. How it ended is then `lease.releasedAs()`.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn link_release(&self, env: Env, lease: &NativeLease) -> napi::Result<Promised> {
        let link = self.link.get(env.raw(), &self.holder)?;
        Link::release(&link, lease)
    }
}
