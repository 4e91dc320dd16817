//! The one place host errors become JavaScript errors.
//!
//! The error objects are built here, in Rust: `lib/errors.js` makes the error
//! classes from the code table ([`error_codes`]) and hands them to the addon
//! once at load (`setErrorClasses`), and a host error
//! becomes an instance of the class its row of the host's code table names
//! (`repute_host::codes`, the Python binding's names too), with a plain-text
//! message in ms, `code`, and every field of its class in camelCase (`null`
//! where this error has none; a duration `retryAfter` becomes `retryAfterMs`).
//!
//! An error can only be built on a JS thread, with its env. A call on the JS
//! thread throws the built object at once. An async task's work runs on a
//! libuv worker: there the host error is parked, whole, on the worker's
//! thread, and [`crate::task::Job`] takes it with the result and builds the
//! error on the JS thread when it rejects the promise.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ptr;

use napi::bindgen_prelude::{JsObjectValue, Null, Object, ToNapiValue, Unknown};
use napi::{check_status, sys, Env, JsValue, ValueType};
use napi_derive::napi;
use repute_host::{codes, Error, Field, Unit};

/// The error classes of one JS thread's env, by name. The references are
/// never released: they live as long as the env that loaded the module.
struct Classes {
    env: sys::napi_env,
    by_name: HashMap<&'static str, sys::napi_ref>,
}

thread_local! {
    static CLASSES: RefCell<Option<Classes>> = const { RefCell::new(None) };
    static PARKED: RefCell<Option<Error>> = const { RefCell::new(None) };
}

/// Registers `lib/errors.js`'s error classes: `ReputeError` and one per class
/// name of the code table, each a constructor taking the message.
#[napi]
pub fn set_error_classes(env: Env, classes: Object) -> napi::Result<()> {
    let mut by_name = HashMap::new();
    for name in std::iter::once(codes::BASE_CLASS).chain(codes::classes()) {
        let class: Unknown = classes.get_named_property(name)?;
        if class.get_type()? != ValueType::Function {
            return Err(napi::Error::from_reason(format!("setErrorClasses: {name} must be a class")));
        }
        let mut reference = ptr::null_mut();
        // SAFETY: on the JS thread, with the value's own env.
        check_status!(unsafe { sys::napi_create_reference(env.raw(), class.raw(), 1, &mut reference) })?;
        by_name.insert(name, reference);
    }
    CLASSES.with(|c| *c.borrow_mut() = Some(Classes { env: env.raw(), by_name }));
    Ok(())
}

/// `retry_after` → `retryAfterMs`, `none_registered` → `noneRegistered`.
fn js_name(name: &str, field: Field<'_>) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    if matches!(field, Field::Duration(_)) {
        out.push_str("Ms");
    }
    out
}

/// The typed error object of `e`, an instance of its class.
fn build(classes: &Classes, e: &Error) -> napi::Result<sys::napi_value> {
    let env = classes.env;
    let info = e.info();
    let class = classes.by_name.get(info.class).or_else(|| classes.by_name.get(codes::BASE_CLASS));
    let class = *class.ok_or_else(|| napi::Error::from_reason("setErrorClasses was not called"))?;
    let mut constructor = ptr::null_mut();
    let mut instance = ptr::null_mut();
    // SAFETY: `classes` belongs to this thread's env (see `to_js`), and the
    // reference was made from a function on it.
    unsafe {
        check_status!(sys::napi_get_reference_value(env, class, &mut constructor))?;
        let message = ToNapiValue::to_napi_value(env, e.message(Unit::Millis))?;
        check_status!(sys::napi_new_instance(env, constructor, 1, &message, &mut instance))?;
    }
    let mut error = Object::from_raw(env, instance);
    error.set_named_property("code", info.code)?;
    for (name, field) in e.fields() {
        let key = js_name(name, field);
        match field {
            Field::Text(s) => error.set_named_property(&key, s)?,
            Field::Count(n) => error.set_named_property(&key, n as f64)?,
            Field::Flag(b) => error.set_named_property(&key, b)?,
            Field::Duration(ns) => error.set_named_property(&key, ns.map(|ns| ns as f64 / 1e6))?,
            Field::Absent => error.set_named_property(&key, Null)?,
        }
    }
    Ok(instance)
}

/// The core's names of the fields this API spells its own way (camelCase,
/// durations in ms), as an `InvalidInputError` names them.
const SPELLED: [(&str, &str); 6] = [
    ("limits.min_interval", "limits.minIntervalMs"),
    ("limits.max_uses", "limits.maxUses"),
    ("limits.max_age", "limits.maxAgeMs"),
    ("limits.per_context.rpm", "limits.perContext.rpm"),
    ("limits.per_context.tpm", "limits.perContext.tpm"),
    ("limits.per_context.min_interval", "limits.perContext.minIntervalMs"),
];

/// `e`, with a field of [`SPELLED`] named as this API names it.
fn spelled(e: Error) -> Error {
    match e {
        Error::InvalidInput { field, rule } => {
            let field = match SPELLED.iter().find(|(core, _)| *core == field) {
                Some((_, js)) => (*js).to_owned(),
                None => field,
            };
            Error::InvalidInput { field, rule }
        }
        e => e,
    }
}

/// The error an addon call throws or an async task rejects with: on a JS
/// thread the typed error object itself; on a libuv worker a plain error
/// with the message, the host error parked for [`take_parked`].
pub(crate) fn to_js(e: Error) -> napi::Error {
    let e = spelled(e);
    let built = CLASSES.with(|c| {
        c.borrow().as_ref().map(|classes| {
            build(classes, &e).map(|value| {
                // SAFETY: `value` was just made on this env.
                napi::Error::from(unsafe { Unknown::from_raw_unchecked(classes.env, value) })
            })
        })
    });
    match built {
        Some(Ok(thrown)) => thrown,
        Some(Err(failed)) => failed,
        None => {
            let plain = napi::Error::from_reason(e.message(Unit::Millis));
            PARKED.with(|p| *p.borrow_mut() = Some(e));
            plain
        }
    }
}

/// Runs `work` (on a libuv worker) and hands back, beside its result, the
/// host error its failure was made from, if any.
pub(crate) fn parking<T>(work: impl FnOnce() -> napi::Result<T>) -> (napi::Result<T>, Option<Error>) {
    PARKED.with(|p| p.borrow_mut().take());
    let result = work();
    let parked = PARKED.with(|p| p.borrow_mut().take());
    match result {
        Ok(v) => (Ok(v), None),
        Err(e) => (Err(e), parked),
    }
}

/// The typed error object of `e`, on the JS thread of `env` (a deferred's
/// rejection on the event loop).
pub(crate) fn to_js_value(env: sys::napi_env, e: Error) -> napi::Result<sys::napi_value> {
    // SAFETY: the caller is on the JS thread of `env`.
    unsafe { ToNapiValue::to_napi_value(env, to_js(e)) }
}

/// `to_js` for `?` on host results.
pub(crate) trait OrThrow<T> {
    fn or_throw(self) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T, Error> {
    fn or_throw(self) -> napi::Result<T> {
        self.map_err(to_js)
    }
}

pub(crate) fn invalid(field: &str, rule: &str) -> Error {
    Error::InvalidInput { field: field.to_owned(), rule: rule.to_owned() }
}

/// One row of the host's code table.
#[napi(object, object_from_js = false)]
pub struct ErrorRow {
    pub code: &'static str,
    pub status: u16,
    pub class: &'static str,
    /// In the host's snake_case.
    pub fields: Vec<&'static str>,
    /// The same fields as an error object carries them (`retryAfterMs`).
    pub js_fields: Vec<String>,
}

/// The code table: the JavaScript layer makes its error classes from it,
/// and the tests check the mapping and the declarations against it.
#[napi(js_name = "_errorCodes")]
pub fn error_codes() -> Vec<ErrorRow> {
    codes::CODES
        .iter()
        .zip(Error::examples())
        .map(|(row, example)| ErrorRow {
            code: row.code,
            status: row.status,
            class: row.class,
            fields: row.fields.to_vec(),
            js_fields: example.fields().into_iter().map(|(name, field)| js_name(name, field)).collect(),
        })
        .collect()
}

/// One error of every row of the code table, in table order, built as a
/// failing call would build it.
#[napi(js_name = "_errorExamples")]
pub fn error_examples(env: &Env) -> napi::Result<Vec<Unknown<'_>>> {
    Error::examples()
        .into_iter()
        .map(|e| {
            let value = to_js_value(env.raw(), e)?;
            // SAFETY: made on this env just now.
            Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
        })
        .collect()
}
