//! TLS for dpctl's HTTP clients and servers: rustls on Graviola's crypto
//! provider (pure Rust and assembler: no C compiler in the build, so the
//! static arm64 release still cross-builds with rust-lld alone), and PEM
//! reading of certificates and private keys. One place for both the API
//! client `dra serve` publishes through and the mock kubelet's
//! `--api-server-tls` listener.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// Whether this CPU has what Graviola's assembler needs (it asserts
/// otherwise): on x86_64 AES-NI, PCLMULQDQ, BMI1/2, ADX, AVX and AVX2 (most
/// CPUs since about 2014); on aarch64 AES, SHA-2, PMULL and NEON.
fn cpu_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("bmi2")
            && std::arch::is_x86_feature_detected!("adx")
            && std::arch::is_x86_feature_detected!("avx")
            && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(target_arch = "aarch64")]
    {
        std::arch::is_aarch64_feature_detected!("aes")
            && std::arch::is_aarch64_feature_detected!("sha2")
            && std::arch::is_aarch64_feature_detected!("pmull")
            && std::arch::is_aarch64_feature_detected!("neon")
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// What is wrong with this machine's TLS or with TLS material; each says
/// where the material came from and what to do.
#[derive(Debug)]
pub enum TlsError {
    /// This CPU lacks what Graviola's crypto needs.
    UnsupportedCpu,
    /// Text that is not PEM (`what`: where it came from, e.g. "certificate-authority-data").
    NotPem {
        /// Where the text came from.
        what: String,
        /// The PEM parser's error.
        source: rustls::pki_types::pem::Error,
    },
    /// PEM text without a certificate.
    NoCertificate {
        /// Where the text came from.
        what: String,
    },
    /// Text that is not a PEM private key.
    NotKey {
        /// Where the text came from.
        what: String,
        /// The PEM parser's error.
        source: rustls::pki_types::pem::Error,
    },
    /// PEM text without a private key.
    NoKey {
        /// Where the text came from.
        what: String,
    },
    /// rustls refused what it was given.
    Refused {
        /// What was given, as the user knows it.
        what: String,
        /// What to do (empty, or `; …`).
        fix: &'static str,
        /// rustls's error.
        source: rustls::Error,
    },
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsError::UnsupportedCpu => f.write_str(
                "TLS is not available on this CPU (dpctl's TLS needs AES, carry-less multiply and AVX2 on \
                 x86_64, or AES, SHA-2 and PMULL on arm64); use a plain http:// API server",
            ),
            TlsError::NotPem { what, source } => write!(f, "{what} is not PEM: {source}"),
            TlsError::NotKey { what, source } => write!(f, "{what} is not a PEM private key: {source}"),
            TlsError::NoCertificate { what } => {
                write!(f, "{what} holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
            }
            TlsError::NoKey { what } => {
                write!(f, "{what} holds no PEM private key (-----BEGIN PRIVATE KEY----- or EC/RSA PRIVATE KEY)")
            }
            TlsError::Refused { what, fix, source } => write!(f, "{what}: {source}{fix}"),
        }
    }
}

impl std::error::Error for TlsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TlsError::NotPem { source, .. } | TlsError::NotKey { source, .. } => Some(source),
            TlsError::Refused { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The crypto provider every TLS config is built with; refused on a CPU
/// Graviola cannot run on.
pub fn provider() -> Result<Arc<CryptoProvider>, TlsError> {
    if !cpu_supported() {
        return Err(TlsError::UnsupportedCpu);
    }
    Ok(Arc::new(rustls_graviola::default_provider()))
}

/// Every `CERTIFICATE` block of a PEM text (`what`: where the text came
/// from, e.g. "certificate-authority-data").
pub fn certs_from_pem(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::NotPem { what: what.to_string(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { what: what.to_string() });
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) of a PEM text.
pub fn key_from_pem(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => TlsError::NoKey { what: what.to_string() },
        source => TlsError::NotKey { what: what.to_string(), source },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_that_holds_no_certificate_or_key_is_named() {
        let e = certs_from_pem(b"hello", "certificate-authority-data").unwrap_err();
        assert!(matches!(&e, TlsError::NoCertificate { what } if what == "certificate-authority-data"), "{e:?}");
        assert!(e.to_string().contains("certificate-authority-data holds no PEM certificate"), "{e}");
        let e =
            key_from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "client-key").unwrap_err();
        assert!(matches!(&e, TlsError::NoKey { .. }), "{e:?}");
        assert!(e.to_string().contains("client-key holds no PEM private key"), "{e}");
    }
}
