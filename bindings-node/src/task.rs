//! Runs one blocking pool call on the libuv thread pool and settles a
//! Promise with its result, so SQLite IO never runs on the JS thread.

use napi::bindgen_prelude::{ToNapiValue, TypeName};
use napi::{Env, Task};

type Work<T> = Box<dyn FnOnce() -> napi::Result<T> + Send>;

pub struct Job<T> {
    work: Option<Work<T>>,
}

impl<T> Job<T> {
    pub(crate) fn new(work: impl FnOnce() -> napi::Result<T> + Send + 'static) -> Self {
        Job { work: Some(Box::new(work)) }
    }
}

impl<T: ToNapiValue + TypeName + Send + 'static> Task for Job<T> {
    type Output = T;
    type JsValue = T;

    fn compute(&mut self) -> napi::Result<T> {
        let work = self.work.take().ok_or_else(|| napi::Error::from_reason("job ran twice"))?;
        work()
    }

    fn resolve(&mut self, _env: Env, output: T) -> napi::Result<T> {
        Ok(output)
    }
}
