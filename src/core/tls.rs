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

/// The crypto provider every TLS config is built with; `Err` (one line, with
/// what to do) on a CPU Graviola cannot run on.
pub fn provider() -> Result<Arc<CryptoProvider>, String> {
    if !cpu_supported() {
        return Err("TLS is not available on this CPU (dpctl's TLS needs AES, carry-less multiply and AVX2 on \
                    x86_64, or AES, SHA-2 and PMULL on arm64); use a plain http:// API server"
            .into());
    }
    Ok(Arc::new(rustls_graviola::default_provider()))
}

/// Every `CERTIFICATE` block of a PEM text; `Err` names what is wrong
/// (`what`: where the text came from, e.g. "certificate-authority-data").
pub fn certs_from_pem(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{what} is not PEM: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{what} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
    Ok(certs)
}

/// The first private key (PKCS#8, PKCS#1 RSA or SEC1 EC) of a PEM text.
pub fn key_from_pem(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| match e {
        rustls::pki_types::pem::Error::NoItemsFound => {
            format!("{what} holds no PEM private key (-----BEGIN PRIVATE KEY----- or EC/RSA PRIVATE KEY)")
        }
        e => format!("{what} is not a PEM private key: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_that_holds_no_certificate_or_key_is_named() {
        let e = certs_from_pem(b"hello", "certificate-authority-data").unwrap_err();
        assert!(e.contains("certificate-authority-data holds no PEM certificate"), "{e}");
        let e =
            key_from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "client-key").unwrap_err();
        assert!(e.contains("client-key holds no PEM private key"), "{e}");
    }
}
