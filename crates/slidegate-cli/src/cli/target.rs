//! `slidegate bench --target`: the flags that drive a running rate-limit
//! service (any Envoy RLS v3 server, slidegate's HTTP API, a gateway)
//! instead of a limiter in this process.

use std::fmt;
use std::str::FromStr;

use clap::Args;

/// What `bench --target` drives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// An Envoy RLS v3 server (`grpc://HOST:PORT`), over HTTP/2 without TLS.
    Grpc {
        /// `HOST:PORT`.
        authority: String,
    },
    /// An HTTP/1.1 server (`http://HOST:PORT/PATH`).
    Http {
        /// `HOST:PORT`.
        authority: String,
        /// The path and query every request asks for.
        path: String,
    },
    /// An HTTP/2 server without TLS, spoken to with prior knowledge
    /// (`h2c://HOST:PORT/PATH`): the requests of an http:// target over a
    /// few shared connections.
    H2c {
        /// `HOST:PORT`.
        authority: String,
        /// The path and query every request asks for.
        path: String,
    },
}

impl FromStr for Target {
    type Err = String;

    fn from_str(text: &str) -> Result<Target, String> {
        let uri: http::Uri = text.parse().map_err(|e| format!("not a URL ({e}): `{text}`"))?;
        let authority = match uri.authority() {
            Some(authority) if authority.port_u16().is_some() && !authority.host().is_empty() => {
                authority.as_str().to_owned()
            }
            _ => return Err(format!("`{text}` needs a host and a port, e.g. grpc://127.0.0.1:8081")),
        };
        if authority.contains('@') {
            return Err(format!("`{text}`: user information is not supported"));
        }
        match uri.scheme_str() {
            Some("grpc") => match uri.path() {
                "" | "/" if uri.query().is_none() => Ok(Target::Grpc { authority }),
                _ => {
                    Err(format!("`{text}`: a grpc:// target takes no path (the RLS method's path is fixed)"))
                }
            },
            Some(scheme @ ("http" | "h2c")) => {
                let path = uri.path_and_query().map_or("/", |p| p.as_str());
                let path = if path.is_empty() { "/" } else { path }.to_owned();
                Ok(if scheme == "http" {
                    Target::Http { authority, path }
                } else {
                    Target::H2c { authority, path }
                })
            }
            Some("https" | "grpcs") => {
                Err(format!("`{text}`: TLS targets are not supported; drive the service over plain TCP"))
            }
            _ => Err(format!(
                "`{text}`: the target is grpc://HOST:PORT, http://HOST:PORT/PATH or h2c://HOST:PORT/PATH"
            )),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Grpc { authority } => write!(f, "grpc://{authority}"),
            Target::Http { authority, path } => write!(f, "http://{authority}{path}"),
            Target::H2c { authority, path } => write!(f, "h2c://{authority}{path}"),
        }
    }
}

/// The flags of `bench --target` (and only of it).
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "Driving a service (--target)")]
pub struct TargetArgs {
    /// Drive a running service instead of a limiter in this process:
    /// `grpc://HOST:PORT` for any Envoy RLS v3 server (slidegate serve,
    /// limitador, envoyproxy/ratelimit), `http://HOST:PORT/PATH` for an
    /// HTTP/1.1 server (slidegate's `/v1/check` when `--descriptor` is
    /// given: a POST of the JSON check; otherwise a GET, e.g. through a
    /// gateway), or `h2c://HOST:PORT/PATH` for the same requests over
    /// HTTP/2 without TLS (prior knowledge, `--connections` shared
    /// connections). Keys are `0` … `--keys - 1`, written where `{key}`
    /// stands in `--descriptor` and `--header` (`{key%N}`: the key
    /// modulo `N`).
    #[arg(long, value_name = "URL")]
    pub target: Option<Target>,

    /// The RLS domain (with `--descriptor` on an http:// target, the
    /// JSON check's `domain`).
    #[arg(long)]
    pub domain: Option<String>,

    /// One request descriptor, `key=value[,key=value…]`, `{key}` standing
    /// for the request's key and `{key%N}` for it modulo `N`, e.g.
    /// `user={key}`, `path=/api,user=u{key}` or `rule=r{key%10},user={key}`
    /// (the keys spread over ten rules); give it again for more descriptors.
    #[arg(long = "descriptor", value_name = "ENTRIES")]
    pub descriptors: Vec<String>,

    /// The request's `hits_addend` (what each request costs; unset, the
    /// server's default of 1).
    #[arg(long, value_name = "N")]
    pub hits_addend: Option<u32>,

    /// An HTTP request header, `name: value`, `{key}` standing for the
    /// request's key, e.g. `x-user: {key}`; give it again for more.
    #[arg(long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,

    /// HTTP/2 connections the requests of a grpc:// or h2c:// target
    /// share (round robin by task) [default: 4]. http:// (HTTP/1.1)
    /// targets open one connection per task instead.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub connections: Option<u64>,

    /// Also report this process's CPU time per decision and its memory
    /// (from `/proc`), e.g. the server's; give it again for more.
    #[arg(long = "pid", value_name = "PID")]
    pub pids: Vec<u32>,
}

impl TargetArgs {
    /// The target-only flags given without `--target`, by name.
    pub fn given_without_target(&self) -> Vec<&'static str> {
        let mut given = Vec::new();
        if self.domain.is_some() {
            given.push("--domain");
        }
        if !self.descriptors.is_empty() {
            given.push("--descriptor");
        }
        if self.hits_addend.is_some() {
            given.push("--hits-addend");
        }
        if !self.headers.is_empty() {
            given.push("--header");
        }
        if self.connections.is_some() {
            given.push("--connections");
        }
        if !self.pids.is_empty() {
            given.push("--pid");
        }
        given
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_targets() {
        assert_eq!(
            "grpc://127.0.0.1:8081".parse::<Target>(),
            Ok(Target::Grpc { authority: "127.0.0.1:8081".into() })
        );
        assert_eq!(
            "http://localhost:8080/v1/check".parse::<Target>(),
            Ok(Target::Http { authority: "localhost:8080".into(), path: "/v1/check".into() })
        );
        assert_eq!(
            "http://[::1]:80".parse::<Target>(),
            Ok(Target::Http { authority: "[::1]:80".into(), path: "/".into() })
        );
        assert_eq!(
            "http://h:1/a?b=c".parse::<Target>(),
            Ok(Target::Http { authority: "h:1".into(), path: "/a?b=c".into() })
        );
        assert_eq!(
            "h2c://127.0.0.1:8080/v1/check".parse::<Target>(),
            Ok(Target::H2c { authority: "127.0.0.1:8080".into(), path: "/v1/check".into() })
        );
        assert_eq!("h2c://h:1/x".parse::<Target>().unwrap().to_string(), "h2c://h:1/x");
        for (bad, says) in [
            ("grpc://127.0.0.1", "port"),
            ("grpc://h:1/x", "no path"),
            ("https://h:443/", "TLS"),
            ("ftp://h:1/", "grpc://HOST:PORT, http"),
            ("h2c://h/", "port"),
            ("nonsense", "host and a port"),
            ("http://u@h:1/", "user information"),
        ] {
            let error = bad.parse::<Target>().unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
        }
    }
}
