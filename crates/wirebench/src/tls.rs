//! TLS for the WebSocket modes (rustls with the ring provider, as `http_client`): the stream
//! type `room` speaks (plain TCP or TLS over it, one type so the code above it is the same;
//! `load` runs rustls' own session over its non-blocking sockets), the client's trust (the system's store, plus `--ca`, or none with
//! `--insecure`), the room's certificate, and one-line causes for handshake failures.

use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use tokio_rustls::rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use tokio_rustls::rustls::{self, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use crate::error::UsageError;

/// A connection: plain TCP, or TLS over TCP (boxed: a TLS session is a few KB, a plain
/// client should not carry its size).
#[derive(Debug)]
pub enum Stream {
    /// ws://
    Plain(TcpStream),
    /// wss://
    Tls(Box<tokio_rustls::TlsStream<TcpStream>>),
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(t) => Pin::new(t.as_mut()).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(t) => t.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Largest PEM file read (a CA bundle, a certificate chain, a key).
const MAX_PEM_BYTES: u64 = 1 << 20;

/// The crypto provider every TLS configuration here uses (ring).
pub(crate) fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Reads a PEM file (a CA bundle, a certificate chain, a key) of at most 1 MiB.
pub(crate) fn read_pem(path: &Path, what: &str) -> Result<Vec<u8>, UsageError> {
    use std::io::Read as _;
    let mut buf = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PEM_BYTES + 1).read_to_end(&mut buf))
        .map_err(|e| UsageError(format!("cannot read {what} {}: {e}", path.display())))?;
    if buf.len() as u64 > MAX_PEM_BYTES {
        return Err(UsageError(format!("{what} {} is larger than 1 MiB", path.display())));
    }
    Ok(buf)
}

fn certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, UsageError> {
    let pem = read_pem(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| UsageError(format!("{what} {}: bad PEM: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(UsageError(format!("{what} {} holds no PEM certificate", path.display())));
    }
    Ok(certs)
}

/// Where a client's trust comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trust {
    /// The system's store (plus `--ca`).
    System,
    /// Only `--ca`.
    CaOnly,
    /// Nothing is checked (`--insecure`).
    Insecure,
}

/// The client configuration: the system's CA store plus `ca` (PEM) when given; with
/// `insecure`, no certificate check at all (the handshake's signatures are still checked,
/// so the session is encrypted, but with whoever answered).
pub fn client_config(ca: Option<&Path>, insecure: bool) -> Result<(Arc<ClientConfig>, Trust), UsageError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| UsageError(format!("TLS setup: {e}")))?;
    if insecure {
        let verifier = Arc::new(NoVerify(provider()));
        let cfg = builder.dangerous().with_custom_certificate_verifier(verifier).with_no_client_auth();
        return Ok((Arc::new(cfg), Trust::Insecure));
    }
    let mut roots = RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    let (added, _) = roots.add_parsable_certificates(system.certs);
    if let Some(p) = ca {
        for c in certs(p, "CA file")? {
            roots.add(c).map_err(|e| UsageError(format!("CA file {}: bad certificate: {e}", p.display())))?;
        }
    }
    if roots.is_empty() {
        return Err(UsageError(
            "wss://: no CA certificates found in the system store (install ca-certificates), and no --ca FILE given"
                .into(),
        ));
    }
    let trust = if added > 0 { Trust::System } else { Trust::CaOnly };
    Ok((Arc::new(builder.with_root_certificates(roots).with_no_client_auth()), trust))
}

/// The room's server configuration: a PEM certificate chain and its PEM private key.
pub fn server_config(cert: &Path, key: &Path) -> Result<Arc<ServerConfig>, UsageError> {
    let chain = certs(cert, "--tls-cert")?;
    let pem = read_pem(key, "--tls-key")?;
    let key = PrivateKeyDer::from_pem_slice(&pem)
        .map_err(|e| UsageError(format!("--tls-key {}: no PEM private key ({e})", key.display())))?;
    let cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| UsageError(format!("TLS setup: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| UsageError(format!("--tls-cert/--tls-key: {e}")))?;
    Ok(Arc::new(cfg))
}

/// The server name to check a certificate against: the URL's host (a name or an address).
pub fn server_name(host: &str) -> Result<ServerName<'static>, UsageError> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(bare.to_owned()).map_err(|_| UsageError(format!("'{host}' is not a valid TLS server name")))
}

/// A handshake failure in one line, with what to do about it.
pub fn cause(e: &io::Error, host: &str) -> String {
    let Some(tls) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()) else {
        return format!("TLS handshake: {e}");
    };
    match tls {
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
            "TLS: the server's certificate is not trusted (unknown issuer): give its CA with --ca FILE, or --insecure for \
             a test server"
                .into()
        }
        rustls::Error::InvalidCertificate(
            rustls::CertificateError::NotValidForName | rustls::CertificateError::NotValidForNameContext { .. },
        ) => format!("TLS: the server's certificate is not valid for '{host}' (the URL's host)"),
        // webpki's reason sits in an `OtherError`; its name is the one stable handle
        rustls::Error::InvalidCertificate(c) if format!("{c:?}").contains("CaUsedAsEndEntity") => {
            "TLS: the server's certificate is a CA certificate (basicConstraints CA:TRUE) used as its own: make it \
             with CA:FALSE, or sign it with a CA"
                .into()
        }
        rustls::Error::InvalidCertificate(c) => {
            let debug = format!("{c:?}");
            let name = debug.split([' ', '(', '{']).next().unwrap_or("");
            format!(
                "TLS: the server's certificate is not trusted ({name}): give its CA with --ca FILE, or --insecure for a \
                 test server"
            )
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            format!("TLS: the server did not answer in TLS ({tls}): is it a ws:// server?")
        }
        other => format!("TLS: {other}"),
    }
}

/// `--insecure`: any certificate passes; signatures over the handshake are still verified.
#[derive(Debug)]
struct NoVerify(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
