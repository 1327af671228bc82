//! A `redis-server` speaking TLS, with certificates made on the spot
//! (rcgen): a CA, a server certificate for 127.0.0.1 it signed, and the
//! ACL user `alice` (password `s3cret`).

use std::io;
use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

use crate::{RedisServer, RedisServerBuilder, free_port};

/// A new CA's certificate (PEM), and a server certificate and key (PEM)
/// for `127.0.0.1` and `localhost` it signed.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The CA certificate clients trust.
    pub ca_pem: String,
    /// The server's certificate.
    pub server_pem: String,
    /// The server's private key.
    pub server_key: String,
}

impl Pki {
    /// Makes a CA and a server certificate.
    ///
    /// # Panics
    ///
    /// If rcgen fails (a test helper).
    pub fn new() -> Pki {
        // Distinct names: OpenSSL (redis-cli, the cluster bus) takes a
        // certificate whose issuer is its own subject for a self-signed one.
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, "slidegate test CA");
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key")).expect("CA");
        let server_key = KeyPair::generate().expect("server key");
        let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
            .expect("server parameters");
        server.distinguished_name.push(DnType::CommonName, "127.0.0.1");
        let server = server.signed_by(&server_key, &ca).expect("server certificate");
        Pki { ca_pem: ca.pem(), server_pem: server.pem(), server_key: server_key.serialize_pem() }
    }
}

/// A certificate authority of its own, issuing server certificates for
/// any names (a gateway's, chosen by SNI).
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    /// Its certificate (PEM), for clients to trust.
    pub ca_pem: String,
}

impl std::fmt::Debug for TestCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestCa")
    }
}

impl TestCa {
    /// A new CA named `name`.
    ///
    /// # Panics
    ///
    /// If rcgen fails (a test helper).
    pub fn new(name: &str) -> TestCa {
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("CA key")).expect("CA");
        let ca_pem = issuer.pem();
        TestCa { issuer, ca_pem }
    }

    /// A server certificate for `names` (DNS names or IP addresses) and
    /// its private key, both PEM.
    ///
    /// # Panics
    ///
    /// If rcgen fails (a test helper).
    pub fn issue(&self, names: &[&str]) -> (String, String) {
        let key = KeyPair::generate().expect("server key");
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>()).expect("names");
        params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("server"));
        let certificate = params.signed_by(&key, &self.issuer).expect("server certificate");
        (certificate.pem(), key.serialize_pem())
    }
}

impl Default for Pki {
    fn default() -> Pki {
        Pki::new()
    }
}

/// A `redis-server` with a TLS port beside its plain one (which the
/// readiness check uses), and the ACL user `alice` / `s3cret`.
#[derive(Debug)]
pub struct TlsServer {
    /// The server (killed on drop).
    pub server: RedisServer,
    /// The TLS port.
    pub tls_port: u16,
    /// The CA certificate file to trust.
    pub ca_file: PathBuf,
}

impl TlsServer {
    /// Starts one, writing the certificates of `pki` into `dir`.
    ///
    /// # Errors
    ///
    /// When the files cannot be written or the server does not come up
    /// (Debian's `redis-server` is built with TLS).
    pub fn start(dir: &Path, pki: &Pki) -> io::Result<TlsServer> {
        let files = write_files(dir, pki)?;
        let tls_port = free_port()?;
        let server = files.server_args(RedisServer::builder(), tls_port).start()?;
        Ok(TlsServer { server, tls_port, ca_file: PathBuf::from(files.ca) })
    }

    /// `rediss://alice:s3cret@127.0.0.1:<tls port>/`.
    pub fn url(&self) -> String {
        format!("rediss://alice:s3cret@127.0.0.1:{}/", self.tls_port)
    }
}

/// The certificate files of a [`Pki`], written.
pub(crate) struct Files {
    cert: String,
    key: String,
    pub(crate) ca: String,
}

/// Writes `pki`'s files into `dir`.
pub(crate) fn write_files(dir: &Path, pki: &Pki) -> io::Result<Files> {
    let write = |name: &str, text: &str| -> io::Result<String> {
        let path = dir.join(name);
        std::fs::write(&path, text)?;
        Ok(path.to_string_lossy().into_owned())
    };
    Ok(Files {
        cert: write("server.pem", &pki.server_pem)?,
        key: write("server.key", &pki.server_key)?,
        ca: write("ca.pem", &pki.ca_pem)?,
    })
}

impl Files {
    /// The certificate settings as configuration file lines (a sentinel's).
    pub(crate) fn config_lines(&self) -> [String; 4] {
        [
            format!("tls-cert-file {}", self.cert),
            format!("tls-key-file {}", self.key),
            format!("tls-ca-cert-file {}", self.ca),
            "tls-auth-clients no".to_owned(),
        ]
    }

    /// `builder` with a TLS port, these certificates and the ACL user
    /// `alice` / `s3cret`.
    pub(crate) fn server_args(&self, mut builder: RedisServerBuilder, tls_port: u16) -> RedisServerBuilder {
        for arg in [
            "--tls-port",
            &tls_port.to_string(),
            "--tls-cert-file",
            &self.cert,
            "--tls-key-file",
            &self.key,
            "--tls-ca-cert-file",
            &self.ca,
            "--tls-auth-clients",
            "no",
            "--user",
            "alice",
            "on",
            ">s3cret",
            "~*",
            "&*",
            "+@all",
        ] {
            builder = builder.arg(arg);
        }
        builder
    }
}
