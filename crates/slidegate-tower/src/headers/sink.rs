//! Where quota headers are written: a response's header map, or text
//! handed on (an RLS answer's header options).

use http::{HeaderMap, HeaderName, HeaderValue};

use super::numbers::number_value;

/// A quota header's value, as the writer has it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    /// A whole number, in decimal.
    Number(u64),
    /// Text written in a buffer (ASCII: rule names are).
    Text(&'a [u8]),
    /// A value built before.
    Built(&'a HeaderValue),
}

/// Where quota headers are written: a response's header map, or text
/// handed on.
pub(crate) trait Sink {
    /// Whether it holds no headers, so none an inner layer wrote (a sink
    /// that keeps nothing, handing headers on, always does).
    fn is_empty(&self) -> bool;
    /// Makes room for `additional` more headers.
    fn reserve(&mut self, additional: usize) {
        let _ = additional;
    }
    /// Adds `value` beside those `name` already has (the IETF lists).
    fn append(&mut self, name: HeaderName, value: Value<'_>);
    /// Sets `name` to `value`, replacing what it had.
    fn insert(&mut self, name: HeaderName, value: Value<'_>);
    /// The text `name` holds, if any.
    fn text(&self, name: &HeaderName) -> Option<&str>;
}

impl Value<'_> {
    /// The value as a header value (`None` for text that cannot be one,
    /// which rule names never are).
    fn header(self) -> Option<HeaderValue> {
        match self {
            Value::Number(n) => Some(number_value(n)),
            Value::Text(bytes) => HeaderValue::from_bytes(bytes).ok(),
            Value::Built(value) => Some(value.clone()),
        }
    }
}

impl Sink for HeaderMap {
    fn is_empty(&self) -> bool {
        HeaderMap::is_empty(self)
    }

    fn reserve(&mut self, additional: usize) {
        HeaderMap::reserve(self, additional);
    }

    fn append(&mut self, name: HeaderName, value: Value<'_>) {
        if let Some(value) = value.header() {
            HeaderMap::append(self, name, value);
        }
    }

    fn insert(&mut self, name: HeaderName, value: Value<'_>) {
        if let Some(value) = value.header() {
            HeaderMap::insert(self, name, value);
        }
    }

    fn text(&self, name: &HeaderName) -> Option<&str> {
        self.get(name)?.to_str().ok()
    }
}

/// A sink handing each header on as text; it holds none itself.
pub(super) struct Texts<F>(pub(super) F);

impl<F: FnMut(&str, &str)> Texts<F> {
    fn put(&mut self, name: &HeaderName, value: Value<'_>) {
        let mut digits = itoa::Buffer::new();
        let bytes = match value {
            Value::Number(n) => digits.format(n).as_bytes(),
            Value::Text(bytes) => bytes,
            Value::Built(value) => value.as_bytes(),
        };
        if let Ok(text) = std::str::from_utf8(bytes) {
            (self.0)(name.as_str(), text);
        }
    }
}

impl<F: FnMut(&str, &str)> Sink for Texts<F> {
    fn is_empty(&self) -> bool {
        true
    }

    fn append(&mut self, name: HeaderName, value: Value<'_>) {
        self.put(&name, value);
    }

    fn insert(&mut self, name: HeaderName, value: Value<'_>) {
        self.put(&name, value);
    }

    fn text(&self, _: &HeaderName) -> Option<&str> {
        None
    }
}
