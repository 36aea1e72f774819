//! TLS settings and the rustls client configuration built from them.
//!
//! We build the rustls `ClientConfig` ourselves (fred's default only knows the platform roots)
//! so that a private CA, a client certificate and an explicitly insecure mode can be used.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fred::types::config::{HostMapping, TlsConfig, TlsConnector, TlsHostMapping};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{RedisError, Result};

/// How a TLS connection (`rediss://`, [`ConnectionConfig::tls`](super::ConnectionConfig::tls))
/// checks the server and presents itself. Ignored when TLS is off.
///
/// The default trusts the platform's root certificates and checks the server's certificate
/// against the host name (or IP) connected to.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TlsOptions {
    /// PEM file of the CA certificate(s) to trust instead of the platform roots (a private CA).
    /// URL parameter `tls_ca`.
    pub ca_file: Option<PathBuf>,
    /// PEM file of the client certificate (chain) to present, for servers that require one
    /// (`tls-auth-clients yes`). Needs [`TlsOptions::key_file`]. URL parameter `tls_cert`.
    pub cert_file: Option<PathBuf>,
    /// PEM file of the client certificate's private key (PKCS#8, PKCS#1 or SEC1). URL parameter
    /// `tls_key`.
    pub key_file: Option<PathBuf>,
    /// The name sent as SNI and checked against the server's certificate, when it differs from
    /// the host connected to (e.g. connecting to an IP whose certificate names a DNS name). In
    /// a cluster it is also used for every discovered node. URL parameter `tls_server_name`.
    pub server_name: Option<String>,
    /// **Insecure**: accept any server certificate, so anyone on the path can read and change
    /// the traffic. Only for test setups whose CA cannot be given. URL parameter
    /// `tls_danger_accept_invalid_certs=true`.
    pub danger_accept_invalid_certs: bool,
}

impl TlsOptions {
    /// Checks the options and reads the PEM files into fred's TLS configuration.
    ///
    /// # Errors
    ///
    /// [`RedisError::TlsFile`] when a file cannot be read or holds no usable PEM data,
    /// [`RedisError::Config`] when a certificate comes without its key (or the other way round),
    /// the key does not fit the certificate, or the server name is not a valid name.
    pub(super) fn fred_tls(&self) -> Result<TlsConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        if let Some(name) = &self.server_name {
            ServerName::try_from(name.as_str()).map_err(|_| {
                RedisError::Config(format!(
                    "TLS server name `{name}` is not a valid DNS name or IP address"
                ))
            })?;
        }
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| RedisError::Config(format!("TLS: {e}")))?;
        let builder = if self.danger_accept_invalid_certs {
            tracing::warn!(
                "TLS certificate verification is off (danger_accept_invalid_certs): the \
                 connection is encrypted but the server is not authenticated"
            );
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { provider }))
        } else {
            let roots = match &self.ca_file {
                Some(path) => ca_roots(path)?,
                None => platform_roots(),
            };
            builder.with_root_certificates(roots)
        };
        let config = match (&self.cert_file, &self.key_file) {
            (None, None) => builder.with_no_client_auth(),
            (Some(cert), Some(key)) => builder
                .with_client_auth_cert(certificates(cert, "client certificate")?, private_key(key)?)
                .map_err(|e| {
                    RedisError::Config(format!(
                        "TLS client certificate {} and key {} do not go together: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?,
            (Some(_), None) => {
                return Err(RedisError::Config(
                    "a TLS client certificate (tls_cert) needs its private key (tls_key)".into(),
                ))
            }
            (None, Some(_)) => {
                return Err(RedisError::Config(
                    "a TLS client key (tls_key) needs its certificate (tls_cert)".into(),
                ))
            }
        };
        let hostnames = match &self.server_name {
            // Cluster nodes are announced by IP: check each against the configured name.
            Some(name) => TlsHostMapping::Custom(Arc::new(FixedServerName(name.clone()))),
            None => TlsHostMapping::None,
        };
        Ok(TlsConfig {
            connector: TlsConnector::from(config),
            hostnames,
        })
    }
}

/// Reads every certificate of a PEM file.
fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>> {
    let bytes = read(path, what)?;
    let certificates = CertificateDer::pem_slice_iter(&bytes)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| tls_file(what, path, format!("not valid PEM: {e}")))?;
    if certificates.is_empty() {
        return Err(tls_file(what, path, "holds no PEM certificate".into()));
    }
    Ok(certificates)
}

fn ca_roots(path: &Path) -> Result<RootCertStore> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(path, "CA")? {
        roots
            .add(certificate)
            .map_err(|e| tls_file("CA", path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    let bytes = read(path, "client key")?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        tls_file(
            "client key",
            path,
            format!("holds no usable PEM private key: {e}"),
        )
    })
}

/// The platform's trusted roots. None found is not an error here: the handshake then fails
/// with an unknown issuer, whose message names the `tls_ca` setting (a host without a CA
/// bundle may still reach servers of a private CA given that way).
fn platform_roots() -> RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        tracing::debug!(%error, "a platform root certificate could not be loaded");
    }
    let mut roots = RootCertStore::empty();
    let (added, _ignored) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        tracing::warn!(
            "TLS: no platform root certificate could be loaded; servers will only be trusted \
             with tls_ca (TlsOptions::ca_file)"
        );
    }
    roots
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| tls_file(what, path, format!("cannot be read: {e}")))
}

fn tls_file(what: &'static str, path: &Path, problem: String) -> RedisError {
    RedisError::TlsFile {
        what,
        path: path.to_owned(),
        problem,
    }
}

/// Names every discovered cluster node with the configured server name.
#[derive(Debug)]
struct FixedServerName(String);

impl HostMapping for FixedServerName {
    fn map(&self, _ip: &std::net::IpAddr, _default_host: &str) -> Option<String> {
        Some(self.0.clone())
    }
}

/// The verifier behind `danger_accept_invalid_certs`: takes any certificate chain, but still
/// checks the handshake signatures so that the session keys come from the certificate's key.
#[derive(Debug)]
struct AcceptAnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
