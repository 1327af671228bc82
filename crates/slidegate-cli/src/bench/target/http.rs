//! The HTTP side of `bench --target http://…`: one keep-alive HTTP/1.1
//! connection per task, reopened when the server closes it.
//!
//! With `--descriptor`, every request is a POST of slidegate's JSON check
//! (`/v1/check`); otherwise a GET with the `--header`s, e.g. through a
//! gateway. 2xx is an allowed request, 429 a denied one, anything else an
//! error counted by its status.
//!
//! The requests are written and the answers read on the socket directly
//! (answers parsed by `httparse`, bodies by length, chunks or the
//! connection's end): the generator shares the machine's cores with what
//! it measures, and hyper's client connection (a task of its own per
//! connection, its buffers and header maps) cost as much CPU per request
//! as the server it drove.

use std::fmt::Write as _;

use bytes::Bytes;
use http::HeaderName;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

use super::template::{EntryTemplate, Template};
use super::{Answer, Failure};

/// The most header bytes of an answer read before giving up on it.
const MAX_HEAD: usize = 64 << 10;

/// Headers an answer may have.
const MAX_HEADERS: usize = 64;

/// What every request of a run looks like.
#[derive(Debug, Clone)]
pub(super) struct HttpPlan {
    /// `HOST:PORT`.
    pub(super) authority: String,
    /// Path and query.
    pub(super) path: String,
    /// Headers, their values templates.
    pub(super) headers: Vec<(HeaderName, Template)>,
    /// The JSON check's domain and descriptors, when there are descriptors.
    pub(super) check: Option<(String, Vec<Vec<EntryTemplate>>)>,
    /// The JSON check's `hits_addend`.
    pub(super) hits_addend: Option<u32>,
}

/// One task's caller.
pub(super) struct HttpCaller {
    plan: HttpPlan,
    stream: Option<TcpStream>,
    /// The request being written.
    request: Vec<u8>,
    /// What was read and not yet consumed.
    input: Vec<u8>,
    scratch: String,
}

/// How an answer's body ends.
enum BodyEnd {
    Length(usize),
    Chunked,
    Close,
}

impl HttpCaller {
    /// A caller following `plan`; it connects on its first call.
    pub(super) fn new(plan: HttpPlan) -> HttpCaller {
        HttpCaller { plan, stream: None, request: Vec::new(), input: Vec::new(), scratch: String::new() }
    }

    /// Asks for `key`.
    pub(super) async fn call(&mut self, key: u64) -> Result<Answer, Failure> {
        self.write_request(key);
        let reused = self.stream.is_some();
        let result = match self.exchange().await {
            // A kept-alive connection the server closed meanwhile: once
            // more on a new one (the request was not answered).
            Err(Exchange::Closed) if reused => {
                self.stream = None;
                self.exchange().await
            }
            result => result,
        };
        match result {
            Ok((status, keep)) => {
                if !keep {
                    self.stream = None;
                }
                classify(status)
            }
            Err(error) => {
                self.stream = None;
                Err(Failure::transport(error.message()))
            }
        }
    }

    /// Writes the request for `key` into `self.request`.
    fn write_request(&mut self, key: u64) {
        let plan = &self.plan;
        let body = plan
            .check
            .as_ref()
            .map(|(domain, descriptors)| check_body(domain, descriptors, plan.hits_addend, key));
        let out = &mut self.request;
        out.clear();
        let method = if body.is_some() { "POST" } else { "GET" };
        out.extend_from_slice(
            format!("{method} {} HTTP/1.1\r\nhost: {}\r\n", plan.path, plan.authority).as_bytes(),
        );
        for (name, value) in &plan.headers {
            value.write(key, &mut self.scratch);
            out.extend_from_slice(name.as_str().as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(self.scratch.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        match &body {
            Some(body) => {
                out.extend_from_slice(
                    format!("content-type: application/json\r\ncontent-length: {}\r\n\r\n", body.len())
                        .as_bytes(),
                );
                out.extend_from_slice(body);
            }
            None => out.extend_from_slice(b"\r\n"),
        }
    }

    /// Sends the request and reads its answer: its status, and whether the
    /// connection stays open.
    async fn exchange(&mut self) -> Result<(u16, bool), Exchange> {
        let stream = match &mut self.stream {
            Some(stream) => stream,
            None => {
                let stream = TcpStream::connect(&self.plan.authority).await.map_err(Exchange::io)?;
                stream.set_nodelay(true).map_err(Exchange::io)?;
                self.input.clear();
                self.stream.insert(stream)
            }
        };
        stream.write_all(&self.request).await.map_err(|_| Exchange::Closed)?;
        // The head.
        let (status, head_len, end, keep) = loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(&self.input) {
                Ok(httparse::Status::Complete(len)) => {
                    let status = response.code.unwrap_or(0);
                    if (100..200).contains(&status) {
                        // An interim answer: the real one follows.
                        self.input.drain(..len);
                        continue;
                    }
                    let (end, keep) = body_end(&response, status)?;
                    break (status, len, end, keep);
                }
                Ok(httparse::Status::Partial) if self.input.len() < MAX_HEAD => {
                    let first = self.input.is_empty();
                    if read_more(stream, &mut self.input).await? == 0 {
                        return Err(if first {
                            Exchange::Closed
                        } else {
                            Exchange::Broken("the answer ended in its head")
                        });
                    }
                }
                Ok(httparse::Status::Partial) => {
                    return Err(Exchange::Broken("an answer head larger than 64 KiB"));
                }
                Err(_) => return Err(Exchange::Broken("not an HTTP/1.1 answer")),
            }
        };
        self.input.drain(..head_len);
        // The body, skipped.
        match end {
            BodyEnd::Length(len) => {
                while self.input.len() < len {
                    if read_more(stream, &mut self.input).await? == 0 {
                        return Err(Exchange::Broken("the answer ended in its body"));
                    }
                }
                self.input.drain(..len);
            }
            BodyEnd::Chunked => loop {
                match httparse::parse_chunk_size(&self.input) {
                    Ok(httparse::Status::Complete((at, 0))) => {
                        // The last chunk, then trailers up to an empty line.
                        let rest = &self.input[at..];
                        if let Some(end) = find(rest, b"\r\n\r\n")
                            .map(|i| i + 4)
                            .or_else(|| rest.starts_with(b"\r\n").then_some(2))
                        {
                            self.input.drain(..at + end);
                            break;
                        }
                    }
                    Ok(httparse::Status::Complete((at, size))) => {
                        let size =
                            usize::try_from(size).map_err(|_| Exchange::Broken("a chunk too large"))?;
                        let end = at.saturating_add(size).saturating_add(2);
                        if self.input.len() >= end {
                            self.input.drain(..end);
                            continue;
                        }
                    }
                    Ok(httparse::Status::Partial) => {}
                    Err(_) => return Err(Exchange::Broken("a malformed chunk")),
                }
                if read_more(stream, &mut self.input).await? == 0 {
                    return Err(Exchange::Broken("the answer ended in its body"));
                }
            },
            BodyEnd::Close => {
                while read_more(stream, &mut self.input).await? > 0 {
                    self.input.clear();
                }
            }
        }
        Ok((status, keep))
    }
}

/// Why an exchange failed.
enum Exchange {
    /// The connection was closed before any of the answer came.
    Closed,
    /// It failed otherwise.
    Io(std::io::Error),
    /// The answer is not HTTP/1.1 as it should be.
    Broken(&'static str),
}

impl Exchange {
    fn io(error: std::io::Error) -> Exchange {
        Exchange::Io(error)
    }

    fn message(&self) -> String {
        match self {
            Exchange::Closed => "the server closed the connection without answering".to_owned(),
            Exchange::Io(error) => error.to_string(),
            Exchange::Broken(what) => (*what).to_owned(),
        }
    }
}

/// How the body of `response` ends, and whether the connection stays open.
fn body_end(response: &httparse::Response<'_, '_>, status: u16) -> Result<(BodyEnd, bool), Exchange> {
    let mut length = None;
    let mut chunked = false;
    let mut keep = response.version == Some(1);
    for header in response.headers.iter() {
        if header.name.eq_ignore_ascii_case("content-length") {
            let text =
                std::str::from_utf8(header.value).map_err(|_| Exchange::Broken("a bad content-length"))?;
            length =
                Some(text.trim().parse::<usize>().map_err(|_| Exchange::Broken("a bad content-length"))?);
        } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
            chunked =
                header.value.split(|&b| b == b',').any(|v| v.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        } else if header.name.eq_ignore_ascii_case("connection") {
            for token in header.value.split(|&b| b == b',') {
                let token = token.trim_ascii();
                if token.eq_ignore_ascii_case(b"close") {
                    keep = false;
                } else if token.eq_ignore_ascii_case(b"keep-alive") {
                    keep = true;
                }
            }
        }
    }
    let end = if status == 204 || status == 304 {
        BodyEnd::Length(0)
    } else if chunked {
        BodyEnd::Chunked
    } else if let Some(length) = length {
        BodyEnd::Length(length)
    } else {
        keep = false;
        BodyEnd::Close
    };
    Ok((end, keep))
}

/// Reads what the socket has into `input`; 0 at its end.
async fn read_more(stream: &mut TcpStream, input: &mut Vec<u8>) -> Result<usize, Exchange> {
    input.reserve(16 << 10);
    stream.read_buf(input).await.map_err(Exchange::io)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// An answer's status as a decision: 2xx allowed, 429 denied, anything
/// else an error counted under its status.
pub(super) fn classify(status: u16) -> Result<Answer, Failure> {
    if (200..300).contains(&status) {
        Ok(Answer::Allowed)
    } else if status == 429 {
        Ok(Answer::Denied)
    } else {
        Err(Failure::new(status.to_string(), &format!("HTTP {status}")))
    }
}

/// The JSON of `/v1/check` for `key`.
pub(super) fn check_body(
    domain: &str,
    descriptors: &[Vec<EntryTemplate>],
    hits_addend: Option<u32>,
    key: u64,
) -> Bytes {
    let json = |text: &str| serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned());
    let mut out = format!("{{\"domain\":{},\"descriptors\":[", json(domain));
    let (mut name, mut value) = (String::new(), String::new());
    for (i, entries) in descriptors.iter().enumerate() {
        out.push_str(if i == 0 { "{\"entries\":[" } else { ",{\"entries\":[" });
        for (j, (name_template, value_template)) in entries.iter().enumerate() {
            name_template.write(key, &mut name);
            value_template.write(key, &mut value);
            let comma = if j == 0 { "" } else { "," };
            let _ = write!(out, "{comma}{{\"key\":{},\"value\":{}}}", json(&name), json(&value));
        }
        out.push_str("]}");
    }
    out.push(']');
    if let Some(hits) = hits_addend {
        let _ = write!(out, ",\"hits_addend\":{hits}");
    }
    out.push('}');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::super::template::parse_descriptor;
    use super::*;

    #[test]
    fn writes_the_json_check() {
        let descriptors =
            vec![parse_descriptor("user={key}").unwrap(), parse_descriptor("a=\"q\",b=c").unwrap()];
        let body = check_body("te\"st", &descriptors, Some(2), 7);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"domain": "te\"st", "hits_addend": 2, "descriptors": [
                {"entries": [{"key": "user", "value": "7"}]},
                {"entries": [{"key": "a", "value": "\"q\""}, {"key": "b", "value": "c"}]},
            ]})
        );
    }
}
