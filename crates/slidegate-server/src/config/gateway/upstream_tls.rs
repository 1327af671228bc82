//! A route's `upstream_tls:` block: how its `https://` upstreams are
//! reached — whom to trust (the system's roots, or a CA file), the client
//! certificate to show (mutual TLS), the name to ask for — checked and
//! built with the file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use serde_saphyr::Spanned;
use sha2::Sha256;

use super::tls::{chain_and_key, key_refused, read_pem};
use super::yaml::UpstreamTlsYaml;
use crate::config::build::Builder;
use crate::config::yaml::position;

/// How a route reaches its `https://` upstreams.
#[derive(Clone)]
#[non_exhaustive]
pub struct UpstreamTls {
    /// The CA certificates (PEM) trusted instead of the system's roots.
    pub ca_file: Option<PathBuf>,
    /// The client certificate chain shown to the upstream (PEM).
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM).
    pub key_file: Option<PathBuf>,
    /// The name asked for (SNI) and verified, instead of the upstream
    /// URL's host.
    pub server_name: Option<ServerName<'static>>,
    pub(crate) config: Arc<ClientConfig>,
}

impl fmt::Debug for UpstreamTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UpstreamTls")
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

impl UpstreamTls {
    /// Every file it was read from.
    pub(crate) fn files(&self) -> impl Iterator<Item = &Path> {
        [&self.ca_file, &self.cert_file, &self.key_file].into_iter().flatten().map(PathBuf::as_path)
    }
}

/// The system's trusted roots, read once.
fn system_roots() -> Result<Arc<RootCertStore>, String> {
    static ROOTS: OnceLock<Arc<RootCertStore>> = OnceLock::new();
    if let Some(roots) = ROOTS.get() {
        return Ok(Arc::clone(roots));
    }
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if added == 0 {
        return Err("the system has no trusted roots to verify https:// upstreams by: give `upstream_tls: \
                    { ca_file: … }`"
            .to_owned());
    }
    Ok(Arc::clone(ROOTS.get_or_init(|| Arc::new(roots))))
}

/// The route's upstream TLS: `None` without `https://` upstreams (a block
/// then is refused). `http2` routes ask for `h2` by ALPN, others for
/// `http/1.1`. Files are read from `dir` for relative paths, and added to
/// `hash`.
pub(super) fn upstream_tls(
    builder: &mut Builder<'_>,
    yaml: Option<Spanned<UpstreamTlsYaml>>,
    (any_https, http2): (bool, bool),
    dir: &Path,
    hash: &mut Sha256,
) -> Option<UpstreamTls> {
    if !any_https {
        if let Some(yaml) = yaml {
            builder
                .error(position(&yaml), "`upstream_tls` is for https:// upstreams, and this route has none");
        }
        return None;
    }
    let (at, yaml) = match yaml {
        Some(yaml) => (Some(position(&yaml)), yaml.value),
        None => (None, UpstreamTlsYaml::default()),
    };
    let at = at.unwrap_or((0, 0));
    let file = |field: &Option<Spanned<String>>| field.as_ref().map(|f| dir.join(f.value.trim()));
    let (ca_file, cert_file, key_file) = (file(&yaml.ca_file), file(&yaml.cert_file), file(&yaml.key_file));
    let built = (|| {
        let roots = match &ca_file {
            None => system_roots()?,
            Some(ca_file) => {
                let text = read_pem(ca_file, hash)?;
                let mut roots = RootCertStore::empty();
                let certs: Vec<CertificateDer<'static>> =
                    CertificateDer::pem_slice_iter(text.as_bytes()).collect::<Result<_, _>>().map_err(
                        |e| format!("`ca_file` ({}) is no PEM certificate list: {e}", ca_file.display()),
                    )?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!("`ca_file` ({}) holds no CA certificate", ca_file.display()));
                }
                Arc::new(roots)
            }
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .with_root_certificates(roots);
        let mut config = match (&cert_file, &key_file) {
            (None, None) => config.with_no_client_auth(),
            (Some(cert_file), Some(key_file)) => {
                let (chain, key) = chain_and_key(cert_file, key_file, hash)?;
                config.with_client_auth_cert(chain, key).map_err(|e| key_refused(e, cert_file, key_file))?
            }
            _ => return Err("a client certificate takes both `cert_file` and `key_file`".to_owned()),
        };
        config.alpn_protocols = vec![if http2 { b"h2".to_vec() } else { b"http/1.1".to_vec() }];
        let server_name = match &yaml.server_name {
            None => None,
            Some(name) => Some(
                ServerName::try_from(name.value.trim().to_owned())
                    .map_err(|_| format!("`server_name: {}` is no DNS name or IP address", name.value))?,
            ),
        };
        Ok(UpstreamTls { ca_file, cert_file, key_file, server_name, config: Arc::new(config) })
    })();
    match built {
        Ok(tls) => Some(tls),
        Err(message) => {
            builder.error(at, format!("upstream_tls: {message}"));
            None
        }
    }
}
