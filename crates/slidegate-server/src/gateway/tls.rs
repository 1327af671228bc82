//! HTTPS at the gateway's listener: the certificates of the gateway file
//! in force, chosen per connection by the client's SNI name, so a reload
//! that reads new ones serves them to new connections (open ones keep
//! theirs).

use std::fmt;
use std::sync::Arc;

use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::version::{TLS12, TLS13};
use rustls::{ServerConfig, crypto};
use tokio_rustls::TlsAcceptor;

use super::Gateway;

/// Chooses a connection's certificate from the gateway file in force.
struct FromTheGatewayFile(Gateway);

impl fmt::Debug for FromTheGatewayFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FromTheGatewayFile")
    }
}

impl ResolvesServerCert for FromTheGatewayFile {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let table = self.0.current();
        table.config.tls.as_ref()?.certificate_for(hello.server_name()).cloned()
    }
}

impl Gateway {
    /// The listener's TLS when the gateway file in force has a `tls:`
    /// block: TLS 1.3 and 1.2 with rustls's safe defaults (ring), ALPN
    /// `h2` then `http/1.1`, session tickets.
    ///
    /// # Errors
    ///
    /// When rustls refuses the configuration (not expected: every part
    /// of it is rustls's own).
    pub(crate) fn tls_acceptor(&self) -> Result<Option<TlsAcceptor>, rustls::Error> {
        if self.current().config.tls.is_none() {
            return Ok(None);
        }
        let provider = Arc::new(crypto::ring::default_provider());
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&TLS13, &TLS12])?
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(FromTheGatewayFile(self.clone())));
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        config.ticketer = crypto::ring::Ticketer::new()?;
        Ok(Some(TlsAcceptor::from(Arc::new(config))))
    }
}
