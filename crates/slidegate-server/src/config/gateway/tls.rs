//! The gateway file's `tls:` block: the certificates the gateway's
//! listener serves HTTPS with, read and checked with the file (a broken
//! one refuses the file, so a reload keeps the ones in force).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::ParsedCertificate;
use rustls::sign::CertifiedKey;
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};

use super::yaml::TlsYaml;
use crate::config::build::Builder;
use crate::config::yaml::position;

/// The most certificates one `tls:` block may list.
const MAX_CERTIFICATES: usize = 100;

/// The gateway's TLS: with it, its listener serves HTTPS (HTTP/2 and
/// HTTP/1.1 by ALPN, TLS 1.2 and 1.3).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewayTls {
    /// The certificates, in the order written: a client's SNI name picks
    /// the first whose names cover it; without a name, or when none
    /// covers it, the first.
    pub certificates: Vec<TlsCertificate>,
}

/// One certificate chain and its key, as read from their files.
#[derive(Clone)]
#[non_exhaustive]
pub struct TlsCertificate {
    /// The PEM file of the chain (the server's certificate first).
    pub cert_file: PathBuf,
    /// The PEM file of its private key (PKCS#8, PKCS#1 or SEC1).
    pub key_file: PathBuf,
    pub(crate) key: Arc<CertifiedKey>,
}

impl fmt::Debug for TlsCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsCertificate")
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .finish_non_exhaustive()
    }
}

impl GatewayTls {
    /// The certificate for a client that asked for `name` (SNI).
    pub(crate) fn certificate_for(&self, name: Option<&str>) -> Option<&Arc<CertifiedKey>> {
        let named = name.and_then(|name| ServerName::try_from(name).ok()).and_then(|name| {
            self.certificates.iter().find(|c| {
                let parsed = c.key.end_entity_cert().and_then(ParsedCertificate::try_from);
                parsed.is_ok_and(|cert| rustls::client::verify_server_name(&cert, &name).is_ok())
            })
        });
        named.or_else(|| self.certificates.first()).map(|c| &c.key)
    }

    /// Every file it was read from.
    pub(crate) fn files(&self) -> impl Iterator<Item = &Path> {
        self.certificates.iter().flat_map(|c| [c.cert_file.as_path(), c.key_file.as_path()])
    }
}

/// The `tls:` block checked, its files read (relative paths from the
/// gateway file's directory, `dir`) and added to `hash`: a certificate
/// replaced on disk makes a reload take the file again.
pub(super) fn tls(
    builder: &mut Builder<'_>,
    yaml: Option<Spanned<TlsYaml>>,
    dir: &Path,
    hash: &mut Sha256,
) -> Option<GatewayTls> {
    let yaml = yaml?;
    let at = position(&yaml);
    let listed = yaml.value.certificates.unwrap_or_default();
    if listed.is_empty() {
        builder.error(at, "`tls` lists no `certificates`: give at least one `{cert_file, key_file}`");
        return None;
    }
    if listed.len() > MAX_CERTIFICATES {
        builder.error(at, format!("`tls` lists more than {MAX_CERTIFICATES} certificates"));
        return None;
    }
    let mut certificates = Vec::with_capacity(listed.len());
    let mut refused = false;
    for certificate in listed {
        let at = position(&certificate);
        let (Some(cert_file), Some(key_file)) = (certificate.value.cert_file, certificate.value.key_file)
        else {
            builder.error(at, "a certificate takes `cert_file` and `key_file` (PEM files)");
            refused = true;
            continue;
        };
        let (cert_file, key_file) = (dir.join(cert_file.value.trim()), dir.join(key_file.value.trim()));
        match load(&cert_file, &key_file, hash) {
            Ok(key) => certificates.push(TlsCertificate { cert_file, key_file, key: Arc::new(key) }),
            Err(why) => {
                builder.error(at, why);
                refused = true;
            }
        }
    }
    (!refused).then_some(GatewayTls { certificates })
}

/// Reads a chain and its key, checked: the chain parses, the key is one
/// rustls can sign with, and it is the certificate's.
fn load(cert_file: &Path, key_file: &Path, hash: &mut Sha256) -> Result<CertifiedKey, String> {
    let (chain, key) = chain_and_key(cert_file, key_file, hash)?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(chain, key, &provider).map_err(|e| key_refused(e, cert_file, key_file))
}

/// A PEM file's text, added to `hash` (a file changed on disk changes the
/// configuration's hash, so a reload takes it).
pub(super) fn read_pem(file: &Path, hash: &mut Sha256) -> Result<String, String> {
    let text = crate::config::read(file).map_err(|e| format!("{}: {}", file.display(), e.message))?;
    hash.update(text.as_bytes());
    hash.update([0]);
    Ok(text)
}

/// The certificate chain of `cert_file` (its first certificate parsing)
/// and the private key of `key_file`, PEM, read and added to `hash`.
pub(super) fn chain_and_key(
    cert_file: &Path,
    key_file: &Path,
    hash: &mut Sha256,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), String> {
    let (cert_pem, key_pem) = (read_pem(cert_file, hash)?, read_pem(key_file, hash)?);
    let named = |what: &str, file: &Path| format!("{what} ({})", file.display());
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{}: {e}", named("`cert_file` is no PEM certificate chain", cert_file)))?;
    let Some(first) = chain.first() else {
        return Err(named("`cert_file` holds no certificate (a PEM `CERTIFICATE` block)", cert_file));
    };
    ParsedCertificate::try_from(first).map_err(|e| {
        format!("{}: {e}", named("`cert_file`'s first certificate does not parse", cert_file))
    })?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(|_| {
        named("`key_file` holds no private key (a PEM `PRIVATE KEY`, `RSA PRIVATE KEY` or `EC PRIVATE KEY` block)", key_file)
    })?;
    Ok((chain, key))
}

/// Why rustls refused `key_file` for `cert_file`.
pub(super) fn key_refused(error: rustls::Error, cert_file: &Path, key_file: &Path) -> String {
    match error {
        rustls::Error::InconsistentKeys(_) => {
            format!(
                "`key_file` ({}) is not the key of `cert_file` ({})",
                key_file.display(),
                cert_file.display()
            )
        }
        other => format!("`key_file` ({}) cannot sign: {other}", key_file.display()),
    }
}
