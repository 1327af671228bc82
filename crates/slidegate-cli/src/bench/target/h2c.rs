//! `bench --target h2c://…`: the HTTP requests of an `http://` target
//! (the JSON check, or a GET with the `--header`s) over a few HTTP/2
//! connections without TLS (prior knowledge), shared by the callers as the
//! gRPC target's are: the same transport as RLS, for comparing the two
//! APIs without HTTP/1.1's one write and one read per request.

use std::sync::Arc;

use http::{HeaderValue, Method, Request, Uri};

use super::http::{HttpPlan, check_body, classify};
use super::link::{Hold, Link, receive};
use super::{Answer, Failure};

/// The most answer body bytes read (the answer is only counted: its body
/// is drained, not kept).
const MAX_BODY: usize = 4 << 20;

/// One task's caller.
pub(super) struct H2cCaller {
    link: Hold,
    plan: HttpPlan,
    uri: Uri,
    scratch: String,
}

impl H2cCaller {
    /// A caller following `plan` on `link`.
    pub(super) fn new(link: Arc<Link>, plan: HttpPlan) -> anyhow::Result<H2cCaller> {
        let uri = Uri::builder()
            .scheme("http")
            .authority(plan.authority.as_str())
            .path_and_query(plan.path.as_str())
            .build()?;
        Ok(H2cCaller { link: Hold::new(link), plan, uri, scratch: String::new() })
    }

    /// Asks for `key`.
    pub(super) async fn call(&mut self, key: u64) -> Result<Answer, Failure> {
        let plan = &self.plan;
        let body = plan
            .check
            .as_ref()
            .map(|(domain, descriptors)| check_body(domain, descriptors, plan.hits_addend, key));
        let mut request = Request::builder().uri(self.uri.clone());
        request = match body {
            Some(_) => request.method(Method::POST).header(http::header::CONTENT_TYPE, "application/json"),
            None => request.method(Method::GET),
        };
        for (name, value) in &plan.headers {
            value.write(key, &mut self.scratch);
            let value = HeaderValue::from_str(&self.scratch)
                .map_err(|e| Failure::transport(format!("header {name}: {e}")))?;
            request = request.header(name, value);
        }
        let request = request.body(()).map_err(|e| Failure::transport(e.to_string()))?;
        let response = self.link.exchange(request, body).await?;
        let (parts, mut body) = response.into_parts();
        receive(&mut body, MAX_BODY, |_| {}).await?;
        classify(parts.status.as_u16())
    }
}
