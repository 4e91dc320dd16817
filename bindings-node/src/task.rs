//! Runs one blocking pool call on the libuv thread pool and settles a
//! Promise with its result, so SQLite IO never runs on the JS thread. A
//! failure rejects with the same typed error a synchronous call throws: the
//! work's host error is kept (see [`crate::errors`]) and built on the JS
//! thread.

use napi::bindgen_prelude::{ToNapiValue, TypeName};
use napi::{Env, Task};
use repute_host::Error;

use crate::errors::{parking, to_js};

type Work<T> = Box<dyn FnOnce() -> napi::Result<T> + Send>;

pub struct Job<T> {
    work: Option<Work<T>>,
    /// The host error the work failed with, until `reject` builds it.
    failed: Option<Error>,
}

impl<T> Job<T> {
    pub(crate) fn new(work: impl FnOnce() -> napi::Result<T> + Send + 'static) -> Self {
        Job { work: Some(Box::new(work)), failed: None }
    }
}

impl<T: ToNapiValue + TypeName + Send + 'static> Task for Job<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        let work = self.work.take().ok_or_else(|| napi::Error::from_reason("job ran twice"))?;
        let (result, failed) = parking(work);
        self.failed = failed;
        result
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<T> {
        Ok(output)
    }

    fn reject(&mut self, _env: Env, err: napi::Error) -> napi::Result<T> {
        Err(self.failed.take().map_or(err, to_js))
    }
}
