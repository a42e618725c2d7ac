//! `mock-kubelet --api-server-tls`: the local API server's own CA and
//! serving certificate, made fresh at each start (ECDSA P-256 keys, held in
//! memory only) for the loopback address it listens on and `localhost`. The
//! CA goes into the kubeconfig the mock kubelet writes
//! (`certificate-authority-data`), so a driver verifies the server as it
//! verifies a real cluster's.

use graviola::hashing::Hash as _;
use graviola::signing::ecdsa::{SigningKey as EcKey, P256};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::net::IpAddr;
use std::sync::Arc;

/// Why the local API server's CA or serving certificate could not be made.
#[derive(Debug)]
pub enum LocalTlsError {
    /// TLS this machine cannot do.
    Tls(crate::core::tls::TlsError),
    /// Graviola could not make or encode a key, or give random numbers (its errors print as Debug).
    Crypto(String),
    /// rcgen refused a certificate's names or could not sign it.
    Certificate {
        /// Which certificate, or what of it.
        what: &'static str,
        /// rcgen's error.
        source: rcgen::Error,
    },
    /// rustls refused the serving configuration.
    Rustls {
        /// What of it.
        what: &'static str,
        /// rustls's error.
        source: rustls::Error,
    },
}

impl std::fmt::Display for LocalTlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LocalTlsError::Tls(e) => e.fmt(f),
            LocalTlsError::Crypto(e) => f.write_str(e),
            LocalTlsError::Certificate { what, source } => write!(f, "{what}: {source}"),
            LocalTlsError::Rustls { what, source } => write!(f, "{what}: {source}"),
        }
    }
}

impl std::error::Error for LocalTlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            LocalTlsError::Tls(e) => Some(e),
            LocalTlsError::Certificate { source, .. } => Some(source),
            LocalTlsError::Rustls { source, .. } => Some(source),
            LocalTlsError::Crypto(_) => None,
        }
    }
}

/// A P-256 key that signs for rcgen.
struct Key {
    key: EcKey<P256>,
    /// The SubjectPublicKeyInfo (DER).
    spki: Vec<u8>,
}

/// An uncompressed P-256 point is 65 bytes, the tail of its SubjectPublicKeyInfo.
const POINT: usize = 65;

impl Key {
    fn generate() -> Result<Key, LocalTlsError> {
        let crypto = LocalTlsError::Crypto;
        let key = EcKey::<P256>::generate().map_err(|e| crypto(format!("cannot generate a key: {e:?}")))?;
        let mut buf = [0u8; 128];
        let spki = key.to_spki_der(&mut buf).map_err(|e| crypto(format!("cannot encode a key: {e:?}")))?.to_vec();
        if spki.len() < POINT {
            return Err(crypto("cannot encode a key: short SubjectPublicKeyInfo".into()));
        }
        Ok(Key { key, spki })
    }

    fn pkcs8(&self) -> Result<PrivateKeyDer<'static>, LocalTlsError> {
        let mut buf = [0u8; 256];
        let der = self
            .key
            .to_pkcs8_der(&mut buf)
            .map_err(|e| LocalTlsError::Crypto(format!("cannot encode a key: {e:?}")))?;
        Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.to_vec())))
    }

    /// RFC 7093 method 1: the leftmost 160 bits of the SHA-256 of the key.
    fn key_id(&self) -> Vec<u8> {
        let h = graviola::hashing::Sha256::hash(&self.spki[self.spki.len() - POINT..]);
        h.as_ref()[..20].to_vec()
    }
}

impl rcgen::PublicKeyData for Key {
    fn der_bytes(&self) -> &[u8] {
        &self.spki[self.spki.len() - POINT..]
    }

    fn algorithm(&self) -> &'static rcgen::SignatureAlgorithm {
        &rcgen::PKCS_ECDSA_P256_SHA256
    }
}

impl rcgen::SigningKey for Key {
    fn sign(&self, msg: &[u8]) -> Result<Vec<u8>, rcgen::Error> {
        let mut buf = [0u8; 128];
        self.key
            .sign_asn1::<graviola::hashing::Sha256>(&[msg], &mut buf)
            .map(|s| s.to_vec())
            .map_err(|_| rcgen::Error::RemoteKeyError)
    }
}

/// A random positive 128-bit serial number.
fn serial() -> Result<rcgen::SerialNumber, LocalTlsError> {
    let mut b = [0u8; 16];
    graviola::random::fill(&mut b).map_err(|e| LocalTlsError::Crypto(format!("no random numbers: {e:?}")))?;
    b[0] &= 0x7f;
    b[0] |= 0x01;
    Ok(rcgen::SerialNumber::from_slice(&b))
}

fn params(cn: &str, key: &Key, sans: Vec<String>) -> Result<rcgen::CertificateParams, LocalTlsError> {
    let mut p = rcgen::CertificateParams::new(sans)
        .map_err(|source| LocalTlsError::Certificate { what: "certificate names", source })?;
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(rcgen::DnType::CommonName, cn);
    p.serial_number = Some(serial()?);
    p.key_identifier_method = rcgen::KeyIdMethod::PreSpecified(key.key_id());
    Ok(p)
}

/// The local API server's TLS: the CA (PEM, for the kubeconfig) and the
/// server's configuration.
pub struct LocalTls {
    /// The CA certificate, PEM.
    pub ca_pem: String,
    /// The serving certificate (DER; the tests verify it against the CA).
    #[cfg_attr(not(test), allow(dead_code))]
    pub cert: CertificateDer<'static>,
    /// The serving configuration (HTTP/1.1 over TLS 1.2 or 1.3).
    pub config: Arc<rustls::ServerConfig>,
}

/// A fresh CA and a serving certificate for `ip` (and 127.0.0.1, `localhost`) it signed.
pub fn local_tls(ip: IpAddr) -> Result<LocalTls, LocalTlsError> {
    let provider = crate::core::tls::provider().map_err(LocalTlsError::Tls)?;
    let ca_key = Key::generate()?;
    let mut ca = params("dpctl mock-kubelet CA", &ca_key, Vec::new())?;
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
    ca.key_usages = vec![rcgen::KeyUsagePurpose::KeyCertSign, rcgen::KeyUsagePurpose::CrlSign];
    let ca = rcgen::CertifiedIssuer::self_signed(ca, ca_key)
        .map_err(|source| LocalTlsError::Certificate { what: "CA certificate", source })?;
    let key = Key::generate()?;
    let mut sans = vec![ip.to_string(), "localhost".to_string()];
    if ip.to_string() != "127.0.0.1" {
        sans.push("127.0.0.1".into());
    }
    let mut server = params("dpctl mock-kubelet API server", &key, sans)?;
    server.key_usages = vec![rcgen::KeyUsagePurpose::DigitalSignature];
    server.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    server.use_authority_key_identifier_extension = true;
    let cert = server
        .signed_by(&key, &ca)
        .map_err(|source| LocalTlsError::Certificate { what: "serving certificate", source })?;
    let chain: Vec<CertificateDer<'static>> = vec![cert.der().clone()];
    let cert = cert.der().clone();
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|source| LocalTlsError::Rustls { what: "TLS", source })?
        .with_no_client_auth()
        .with_single_cert(chain, key.pkcs8()?)
        .map_err(|source| LocalTlsError::Rustls { what: "TLS serving certificate", source })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(LocalTls { ca_pem: ca.pem(), cert, config: Arc::new(config) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::client::danger::ServerCertVerifier as _;

    fn verify(ca_pem: &str, cert: &CertificateDer<'static>, name: &str) -> Result<(), rustls::Error> {
        let mut store = rustls::RootCertStore::empty();
        for c in crate::core::tls::certs_from_pem(ca_pem.as_bytes(), "ca").unwrap() {
            store.add(c).unwrap();
        }
        let provider = crate::core::tls::provider().unwrap();
        let v = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider).build().unwrap();
        let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
        v.verify_server_cert(cert, &[], &name, &[], rustls::pki_types::UnixTime::now()).map(|_| ())
    }

    #[test]
    fn the_serving_certificate_chains_to_its_own_ca_for_loopback_and_localhost_only() {
        let t = local_tls("127.0.0.1".parse().unwrap()).unwrap();
        assert!(t.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"), "{}", t.ca_pem);
        verify(&t.ca_pem, &t.cert, "127.0.0.1").unwrap();
        verify(&t.ca_pem, &t.cert, "localhost").unwrap();
        let e = verify(&t.ca_pem, &t.cert, "example.com").unwrap_err();
        assert!(
            matches!(e, rustls::Error::InvalidCertificate(rustls::CertificateError::NotValidForNameContext { .. })),
            "{e}"
        );
        let other = local_tls("::1".parse().unwrap()).unwrap();
        verify(&other.ca_pem, &other.cert, "::1").unwrap();
        let e = verify(&other.ca_pem, &t.cert, "127.0.0.1").unwrap_err();
        // Same CA name, another key: a fresh CA at each start.
        assert_eq!(e, rustls::Error::InvalidCertificate(rustls::CertificateError::BadSignature));
    }
}
