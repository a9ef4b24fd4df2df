//! A small HTTP/1.1 client (hyper on the tokio runtime; rustls with the ring provider for
//! `https`): what `mesh status` needs to pull agents and Prometheus, and what discovery needs
//! to list and watch the Kubernetes API. Every request is bounded: one deadline for
//! connecting, the TLS handshake and the response head, a byte cap on bodies read whole,
//! and the caller's own per-chunk deadline on bodies it streams.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow, bail};
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::{Request, Response, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};

/// The characters a query value keeps as they are: RFC 3986's unreserved set.
const UNRESERVED: &percent_encoding::AsciiSet =
    &percent_encoding::NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// `s` percent-encoded for a URL's query (a label selector, a PromQL expression, a token).
pub fn query_value(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, UNRESERVED).to_string()
}

/// A body past the cap [`HttpClient::get`] was given (its own type, so a caller can tell
/// an answer too long for its budget from one that failed).
#[derive(Debug)]
pub struct TooLong {
    /// What was asked.
    pub url: String,
    /// The cap, bytes.
    pub limit: usize,
}

impl std::fmt::Display for TooLong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: body: length limit exceeded (limit {} bytes)", self.url, self.limit)
    }
}

impl std::error::Error for TooLong {}

/// A client for `http://` URLs, and for `https://` ones when it has a CA.
#[derive(Clone)]
pub struct HttpClient {
    tls: Option<Arc<ClientConfig>>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient").field("tls", &self.tls.is_some()).finish()
    }
}

impl HttpClient {
    /// Plain HTTP only.
    pub fn plain() -> Self {
        Self { tls: None }
    }

    /// HTTP and HTTPS, trusting the certificates in `ca_pem`.
    pub fn with_ca(ca_pem: &[u8]) -> anyhow::Result<Self> {
        let mut roots = RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(ca_pem) {
            roots.add(cert.context("CA file: bad PEM")?).context("CA file: bad certificate")?;
        }
        if roots.is_empty() {
            bail!("CA file holds no certificate");
        }
        let config = ClientConfig::builder_with_provider(crate::tls::provider())
            .with_safe_default_protocol_versions()
            .context("TLS setup")?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self { tls: Some(Arc::new(config)) })
    }

    /// Sends `GET url` (with a bearer token if given) and returns the response with its body
    /// unread, within `timeout` for connecting and the response head.
    pub async fn open(&self, url: &Uri, bearer: Option<&str>, timeout: Duration) -> anyhow::Result<Response<Incoming>> {
        tokio::time::timeout(timeout, self.open_unbounded(url, bearer))
            .await
            .map_err(|_| anyhow!("{url}: no response within {}", humantime::format_duration(timeout)))?
    }

    async fn open_unbounded(&self, url: &Uri, bearer: Option<&str>) -> anyhow::Result<Response<Incoming>> {
        let https = match url.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => bail!("{url}: only http:// and https:// URLs"),
        };
        let host = url.host().ok_or_else(|| anyhow!("{url}: no host"))?;
        let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let tcp = TcpStream::connect((bare, port)).await.with_context(|| format!("cannot connect to {url}"))?;
        let _ = tcp.set_nodelay(true);
        let path = url.path_and_query().map_or("/", |p| p.as_str());
        let mut req = Request::get(path)
            .header(hyper::header::HOST, url.authority().map_or(host, |a| a.as_str()))
            .header(hyper::header::USER_AGENT, concat!("wirebench/", env!("CARGO_PKG_VERSION")));
        if let Some(t) = bearer {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let req = req.body(Empty::<Bytes>::new()).context("bad request")?;
        if https {
            let config = self.tls.clone().ok_or_else(|| anyhow!("{url}: https needs a CA file"))?;
            let name = ServerName::try_from(bare.to_owned()).with_context(|| format!("{url}: bad TLS server name"))?;
            let tls = TlsConnector::from(config).connect(name, tcp).await.with_context(|| format!("{url}: TLS"))?;
            send(TokioIo::new(tls), req, url).await
        } else {
            send(TokioIo::new(tcp), req, url).await
        }
    }

    /// `GET url`, the whole body (at most `limit` bytes), within `timeout` in all.
    pub async fn get(
        &self,
        url: &Uri,
        bearer: Option<&str>,
        limit: usize,
        timeout: Duration,
    ) -> anyhow::Result<(u16, Bytes)> {
        let work = async {
            let resp = self.open_unbounded(url, bearer).await?;
            let status = resp.status().as_u16();
            let body = Limited::new(resp.into_body(), limit)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<LengthLimitError>() {
                        anyhow::Error::new(TooLong { url: url.to_string(), limit })
                    } else {
                        anyhow!("{url}: body: {e} (limit {limit} bytes)")
                    }
                })?
                .to_bytes();
            Ok((status, body))
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| anyhow!("{url}: no complete answer within {}", humantime::format_duration(timeout)))?
    }
}

async fn send<I>(io: I, req: Request<Empty<Bytes>>, url: &Uri) -> anyhow::Result<Response<Incoming>>
where
    I: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(io).await.with_context(|| format!("{url}: HTTP handshake"))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender.send_request(req).await.with_context(|| format!("{url}: request failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_keep_only_the_unreserved_characters() {
        assert_eq!(query_value("kubernetes.io/service-name=a"), "kubernetes.io%2Fservice-name%3Da");
        assert_eq!(query_value("eyJ2+/="), "eyJ2%2B%2F%3D");
        assert_eq!(query_value("a-b._~ c"), "a-b._~%20c");
        assert_eq!(query_value("é"), "%C3%A9", "UTF-8 bytes");
    }

    #[test]
    fn refuses_what_it_cannot_fetch() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let c = HttpClient::plain();
        let err = |u: &str| {
            rt.block_on(c.get(&u.parse().unwrap(), None, 10, Duration::from_secs(1))).unwrap_err().to_string()
        };
        assert!(err("ftp://127.0.0.1/x").contains("only http"));
        assert!(err("https://127.0.0.1:1/x").contains("cannot connect") || err("https://127.0.0.1:1/x").contains("CA"));
        assert!(HttpClient::with_ca(b"not pem").is_err());
    }
}
