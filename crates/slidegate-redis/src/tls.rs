//! TLS to Redis (`rediss://`, `rediss+cluster://`, `rediss+sentinel://`):
//! rustls with the ring provider, trusting the system's roots or a CA file
//! given to the builder ([`RedisStoreBuilder::tls_ca_file`](crate::RedisStoreBuilder::tls_ca_file)).

use redis::{Client, IntoConnectionInfo, RedisResult};

/// Trusted roots: the system's, or these PEM certificates.
#[derive(Debug, Clone, Default)]
pub(crate) struct Roots(pub(crate) Option<std::sync::Arc<Vec<u8>>>);

impl Roots {
    /// A client for `info` (TLS when its scheme says so), trusting these roots.
    pub(crate) fn client(&self, info: impl IntoConnectionInfo) -> RedisResult<Client> {
        let info = info.into_connection_info()?;
        match &self.0 {
            None => Client::open(info),
            #[cfg(feature = "tls")]
            Some(pem) => {
                install_provider();
                Client::build_with_tls(
                    info,
                    redis::TlsCertificates { client_tls: None, root_cert: Some(pem.to_vec()) },
                )
            }
            #[cfg(not(feature = "tls"))]
            Some(_) => Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                "a TLS CA file needs slidegate-redis' `tls` feature",
            ))),
        }
    }

    /// The certificates for a Cluster client, when some are given.
    #[cfg(feature = "tls")]
    pub(crate) fn certificates(&self) -> Option<redis::TlsCertificates> {
        install_provider();
        self.0.as_ref().map(|pem| redis::TlsCertificates { client_tls: None, root_cert: Some(pem.to_vec()) })
    }
}

/// rustls needs one crypto provider per process; the application may have
/// chosen one already (then it is used).
#[cfg(feature = "tls")]
pub(crate) fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Without the `tls` feature there is nothing to install.
#[cfg(not(feature = "tls"))]
pub(crate) fn install_provider() {}
