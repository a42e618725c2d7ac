//! `exec` credential plugins as client-go runs them
//! (`plugin/pkg/client/auth/exec`): the kubeconfig's command is run with its
//! args and env plus `KUBERNETES_EXEC_INFO` (an `ExecCredential` of the
//! configured `client.authentication.k8s.io` version, with the cluster when
//! `provideClusterInfo` is set); its stdout is an `ExecCredential` whose
//! `status` holds a token or a client certificate and key. The result is kept
//! until its `expirationTimestamp` (forever without one) and the plugin is run
//! again after it, or when the API server answers 401 to the credentials it
//! gave (once per credential, as client-go's `maybeRefreshCreds`).
//!
//! dpctl runs plugins as client-go does for a caller whose standard input is
//! unavailable (`StdinUnavailable`): never interactively, so
//! `interactiveMode: Always` is client-go's error. Unlike client-go, a plugin
//! that does not finish within [`PLUGIN_TIMEOUT`] is killed and is an error,
//! and its stderr is part of the error instead of passed through.
//!
//! [`credential`] and [`exec_info`] are pure; [`ExecAuth`] runs the plugin.

use serde_json::{json, Value};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// `client.authentication.k8s.io/v1`.
pub const V1: &str = "client.authentication.k8s.io/v1";
/// `client.authentication.k8s.io/v1beta1`.
pub const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";
/// The environment variable the plugin reads its `ExecCredential` input from.
pub const EXEC_INFO_ENV: &str = "KUBERNETES_EXEC_INFO";
/// How long a plugin may run before it is killed (client-go waits forever).
pub const PLUGIN_TIMEOUT: Duration = Duration::from_secs(60);
/// The most stdout read from a plugin.
const MAX_STDOUT: usize = 1 << 20;

/// client-go's text after "executable X not found" (`installHintVerboseHelp`), on one line.
pub const NOT_FOUND_HELP: &str = "It looks like you are trying to use a client-go credential plugin that is not \
     installed. To learn more about this feature, consult the documentation available at: \
     https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins";

/// Why standard input is unavailable to plugins (client-go's `StdinUnavailableMessage`).
pub const STDIN_UNAVAILABLE: &str =
    "dpctl runs credential plugins without a terminal; set interactiveMode to IfAvailable or Never";

/// `interactiveMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InteractiveMode {
    /// Never give the plugin standard input.
    Never,
    /// Give it standard input when there is a terminal (dpctl: never).
    IfAvailable,
    /// The plugin needs a terminal: client-go's error under dpctl.
    Always,
}

/// A user's `exec` section, validated and with its command resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecConfig {
    /// The command: a name looked up in PATH, or a path (a relative one
    /// already resolved against its kubeconfig's directory).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment, after the process's own.
    pub env: Vec<(String, String)>,
    /// [`V1`] or [`V1BETA1`].
    pub api_version: String,
    /// `interactiveMode` (defaulted to IfAvailable for v1beta1, as clientcmd's v1 defaults).
    pub interactive: InteractiveMode,
    /// `provideClusterInfo`: the cluster goes in `KUBERNETES_EXEC_INFO`.
    pub provide_cluster_info: bool,
    /// `installHint`, shown when the command is not found (ANSI escapes removed).
    pub install_hint: String,
}

/// What went wrong getting credentials from a plugin; each one line in
/// client-go's words, with the fix after a `;` where client-go gives none.
#[derive(Debug)]
pub enum ExecError {
    /// `interactiveMode: Always`: client-go's error for a caller whose
    /// standard input is unavailable (whether it is a terminal says which).
    Interactive {
        /// Whether dpctl's standard input is a terminal.
        terminal: bool,
    },
    /// The command is not in PATH or not there (`exec.Error`).
    NotFound {
        /// The command as configured.
        cmd: String,
        /// The kubeconfig's installHint (may be empty).
        hint: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// It could not be started for another reason.
    Spawn {
        /// The command.
        cmd: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// It exited with a non-zero code (or by a signal: code -1, as Go).
    Exit {
        /// The command.
        cmd: String,
        /// Its exit code.
        code: i32,
        /// The end of its stderr.
        stderr: String,
    },
    /// It did not finish in time and was killed.
    Timeout {
        /// The command.
        cmd: String,
        /// How long it had.
        after: Duration,
    },
    /// Its stdout is not an ExecCredential.
    Decode(String),
    /// Its stdout is an ExecCredential of another version.
    Version {
        /// The version configured.
        want: String,
        /// The version it printed.
        got: String,
    },
    /// No `status`.
    NoStatus,
    /// A status with neither a token nor a certificate and key.
    NoCredentials,
    /// A certificate without its key or the reverse.
    HalfPair,
    /// The certificate and key do not parse or do not match.
    KeyPair(Box<dyn std::error::Error + Send + Sync>),
    /// `expirationTimestamp` is not a time.
    Expiry(crate::core::time::TimeError),
    /// The CA file for `provideClusterInfo` could not be read.
    ClusterCa {
        /// The kubeconfig's `certificate-authority`.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

impl fmt::Display for ExecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExecError::Interactive { terminal: false } => write!(
                f,
                "exec plugin cannot support interactive mode: standard input is not a terminal; set interactiveMode to IfAvailable or Never"
            ),
            ExecError::Interactive { terminal: true } => {
                write!(f, "exec plugin cannot support interactive mode: standard input is unavailable: {STDIN_UNAVAILABLE}")
            }
            ExecError::NotFound { cmd, hint, .. } => {
                write!(f, "exec: executable {cmd} not found; {NOT_FOUND_HELP}")?;
                if !hint.is_empty() {
                    write!(f, "; {}", one_line(hint))?;
                }
                Ok(())
            }
            // A path is not looked up: Go's exec.Command fails in fork/exec (a *PathError).
            ExecError::Spawn { cmd, source } => {
                write!(f, "exec: fork/exec {cmd}: {}; fix the exec command or install it there", go_errno(source))
            }
            ExecError::Exit { cmd, code, stderr } => {
                write!(f, "exec: executable {cmd} failed with exit code {code}")?;
                if !stderr.is_empty() {
                    write!(f, " (stderr: {stderr})")?;
                }
                write!(f, "; run it by hand to see why")
            }
            ExecError::Timeout { cmd, after } => write!(
                f,
                "exec: executable {cmd} did not finish within {} and was killed; check that it runs without a terminal",
                crate::core::time::format_duration(*after)
            ),
            ExecError::Decode(e) => {
                write!(f, "decoding stdout: {e}; the plugin must print an ExecCredential as JSON")
            }
            ExecError::Version { want, got } => write!(
                f,
                "exec plugin is configured to use API version {want}, plugin returned version {got}; set the kubeconfig's exec apiVersion to {got}"
            ),
            ExecError::NoStatus => write!(f, "exec plugin didn't return a status field"),
            ExecError::NoCredentials => write!(f, "exec plugin didn't return a token or cert/key pair"),
            ExecError::HalfPair => write!(f, "exec plugin returned only certificate or key, not both"),
            ExecError::KeyPair(e) => write!(f, "failed parsing client key/certificate: {e}"),
            ExecError::Expiry(e) => write!(f, "decoding stdout: status.expirationTimestamp: {e}"),
            ExecError::ClusterCa { path, source } => write!(
                f,
                "failed to load CA bundle for execProvider: certificate-authority {}: {source}; fix the path",
                path.display()
            ),
        }
    }
}

impl std::error::Error for ExecError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ExecError::NotFound { source, .. } | ExecError::Spawn { source, .. } => Some(source),
            ExecError::ClusterCa { source, .. } => Some(source),
            ExecError::KeyPair(e) => Some(e.as_ref()),
            ExecError::Expiry(e) => Some(e),
            _ => None,
        }
    }
}

/// An OS error as Go's syscall.Errno prints it ("no such file or directory").
fn go_errno(e: &std::io::Error) -> String {
    let text = match e.raw_os_error() {
        Some(n) => {
            let t = std::io::Error::from_raw_os_error(n).to_string();
            t.split(" (os error").next().unwrap_or(&t).to_string()
        }
        None => e.to_string(),
    };
    let mut c = text.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => text,
    }
}

/// Text on one line: runs of whitespace (newlines too) become one space.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// What a plugin gave: a bearer token and/or a client certificate and key (PEM).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Credential {
    /// `status.token`.
    pub token: Option<String>,
    /// `status.clientCertificateData` and `status.clientKeyData`.
    pub cert: Option<(Vec<u8>, Vec<u8>)>,
    /// `status.expirationTimestamp`: none, valid until refused.
    pub expiry: Option<SystemTime>,
}

/// A plugin's stdout read as client-go reads it (pure): an `ExecCredential`
/// of `api_version` with a status holding a token or a cert/key pair.
pub fn credential(stdout: &[u8], api_version: &str) -> Result<Credential, ExecError> {
    let v: Value = serde_json::from_slice(stdout)
        .or_else(|e| {
            // client-go's universal decoder also reads YAML.
            serde_norway::from_slice::<Value>(stdout).ok().filter(Value::is_object).ok_or(e)
        })
        .map_err(|e| ExecError::Decode(e.to_string()))?;
    let s = |o: &Value, k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (got, kind) = (s(&v, "apiVersion"), s(&v, "kind"));
    if kind.is_empty() {
        return Err(ExecError::Decode("Object 'Kind' is missing".into()));
    }
    if got.is_empty() {
        return Err(ExecError::Decode("Object 'apiVersion' is missing".into()));
    }
    if kind != "ExecCredential" || !(got == V1 || got == V1BETA1) {
        return Err(ExecError::Decode(format!("no kind {kind:?} is registered for version {got:?}")));
    }
    if got != api_version {
        return Err(ExecError::Version { want: api_version.to_string(), got });
    }
    let status = match v.get("status") {
        Some(st) if st.is_object() => st,
        _ => return Err(ExecError::NoStatus),
    };
    let (token, cert, key) = (s(status, "token"), s(status, "clientCertificateData"), s(status, "clientKeyData"));
    if token.is_empty() && cert.is_empty() && key.is_empty() {
        return Err(ExecError::NoCredentials);
    }
    if cert.is_empty() != key.is_empty() {
        return Err(ExecError::HalfPair);
    }
    let expiry = match status.get("expirationTimestamp").and_then(Value::as_str).filter(|t| !t.is_empty()) {
        None => None,
        Some(t) => Some(crate::core::time::parse_rfc3339(t).map_err(ExecError::Expiry)?),
    };
    let cert = if cert.is_empty() {
        None
    } else {
        crate::core::tls::certs_from_pem(cert.as_bytes(), "clientCertificateData")
            .map_err(|e| ExecError::KeyPair(Box::new(e)))?;
        crate::core::tls::key_from_pem(key.as_bytes(), "clientKeyData").map_err(|e| ExecError::KeyPair(Box::new(e)))?;
        Some((cert.into_bytes(), key.into_bytes()))
    };
    Ok(Credential { token: (!token.is_empty()).then_some(token), cert, expiry })
}

/// The cluster as `provideClusterInfo` hands it to a plugin (`rest.ConfigToExecCluster`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClusterInfo {
    /// `server`, as the kubeconfig writes it.
    pub server: String,
    /// `tls-server-name`.
    pub tls_server_name: Option<String>,
    /// `insecure-skip-tls-verify`.
    pub insecure: bool,
    /// The CA bundle's bytes.
    pub ca: Option<Vec<u8>>,
    /// `proxy-url`.
    pub proxy_url: Option<String>,
    /// The cluster's `client.authentication.k8s.io/exec` extension.
    pub config: Option<Value>,
}

/// `KUBERNETES_EXEC_INFO`'s value (pure): an ExecCredential of the plugin's
/// version with `spec.interactive` (always false under dpctl) and the cluster
/// when `provideClusterInfo` is set.
pub fn exec_info(api_version: &str, cluster: Option<&ClusterInfo>) -> String {
    use base64::Engine as _;
    let mut spec = json!({"interactive": false});
    if let Some(c) = cluster {
        let mut o = json!({"server": c.server});
        if let Some(n) = &c.tls_server_name {
            o["tls-server-name"] = json!(n);
        }
        if c.insecure {
            o["insecure-skip-tls-verify"] = json!(true);
        }
        if let Some(ca) = &c.ca {
            o["certificate-authority-data"] = json!(base64::engine::general_purpose::STANDARD.encode(ca));
        }
        if let Some(p) = &c.proxy_url {
            o["proxy-url"] = json!(p);
        }
        if let Some(cfg) = &c.config {
            o["config"] = cfg.clone();
        }
        spec["cluster"] = o;
    }
    json!({"kind": "ExecCredential", "apiVersion": api_version, "spec": spec}).to_string()
}

/// Credentials in use: what the plugin gave and a serial number, so a 401
/// re-runs the plugin once for the credential it refused.
#[derive(Debug)]
pub struct Current {
    /// Which run of the plugin gave them (1, 2, …).
    pub serial: u64,
    /// What it gave.
    pub cred: Credential,
    /// The TLS configuration with its client certificate, when it gave one.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

/// Builds the client TLS configuration for the certificate and key (PEM) a
/// plugin gave: the connection's own settings plus that certificate.
pub type CertTls = Box<
    dyn Fn(&[u8], &[u8]) -> Result<Arc<rustls::ClientConfig>, Box<dyn std::error::Error + Send + Sync>> + Send + Sync,
>;

/// One user's plugin and what it last gave, shared by every request.
pub struct ExecAuth {
    /// The plugin.
    pub config: ExecConfig,
    /// The cluster it is told about (with `provideClusterInfo`).
    pub cluster: Option<ClusterInfo>,
    /// How long a run may take.
    pub timeout: Duration,
    /// How a plugin's certificate becomes a TLS configuration (none: it is ignored, plain http).
    cert_tls: Option<CertTls>,
    cache: tokio::sync::Mutex<Option<Arc<Current>>>,
    runs: std::sync::atomic::AtomicU64,
}

impl fmt::Debug for ExecAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecAuth")
            .field("config", &self.config)
            .field("cluster", &self.cluster)
            .field("timeout", &self.timeout)
            .field("runs", &self.runs())
            .finish_non_exhaustive()
    }
}

impl ExecAuth {
    /// A plugin not yet run.
    pub fn new(config: ExecConfig, cluster: Option<ClusterInfo>, cert_tls: Option<CertTls>) -> Self {
        ExecAuth {
            config,
            cluster,
            timeout: PLUGIN_TIMEOUT,
            cert_tls,
            cache: tokio::sync::Mutex::new(None),
            runs: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// How many times the plugin has been run.
    pub fn runs(&self) -> u64 {
        self.runs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The credentials to send: the cached ones until they expire, else a
    /// new run of the plugin (`getCreds`).
    pub async fn get(&self) -> Result<Arc<Current>, ExecError> {
        let mut cache = self.cache.lock().await;
        if let Some(c) = cache.as_ref() {
            if c.cred.expiry.is_none_or(|exp| SystemTime::now() <= exp) {
                return Ok(c.clone());
            }
        }
        let c = self.refresh().await?;
        *cache = Some(c.clone());
        Ok(c)
    }

    /// After a 401 to `refused`: run the plugin again unless another request
    /// already did (`maybeRefreshCreds`).
    pub async fn refused(&self, refused: &Current) -> Result<(), ExecError> {
        let mut cache = self.cache.lock().await;
        if cache.as_ref().is_some_and(|c| c.serial != refused.serial) {
            return Ok(());
        }
        let c = self.refresh().await?;
        *cache = Some(c);
        Ok(())
    }

    async fn refresh(&self) -> Result<Arc<Current>, ExecError> {
        let cred = self.run().await?;
        let tls = match (&cred.cert, &self.cert_tls) {
            (Some((cert, key)), Some(make)) => Some(make(cert, key).map_err(ExecError::KeyPair)?),
            _ => None,
        };
        let serial = self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Ok(Arc::new(Current { serial, cred, tls }))
    }

    /// Run the plugin once and read what it printed.
    async fn run(&self) -> Result<Credential, ExecError> {
        let c = &self.config;
        if c.interactive == InteractiveMode::Always {
            // SAFETY: isatty only reads the state of file descriptor 0.
            let terminal = unsafe { libc::isatty(0) } == 1;
            return Err(ExecError::Interactive { terminal });
        }
        let cluster = if c.provide_cluster_info { self.cluster.as_ref() } else { None };
        let mut cmd = tokio::process::Command::new(&c.command);
        cmd.args(&c.args)
            .envs(c.env.iter().map(|(k, v)| (k, v)))
            .env(EXEC_INFO_ENV, exec_info(&c.api_version, cluster))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|source| match source.kind() {
            // A bare name not found in PATH (Go's *exec.Error); a path is a Spawn error.
            std::io::ErrorKind::NotFound if !c.command.contains('/') => {
                ExecError::NotFound { cmd: c.command.clone(), hint: c.install_hint.clone(), source }
            }
            _ => ExecError::Spawn { cmd: c.command.clone(), source },
        })?;
        let out = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Err(_) => return Err(ExecError::Timeout { cmd: c.command.clone(), after: self.timeout }),
            Ok(Err(source)) => return Err(ExecError::Spawn { cmd: c.command.clone(), source }),
            Ok(Ok(out)) => out,
        };
        if !out.status.success() {
            let err = one_line(&String::from_utf8_lossy(&out.stderr));
            let tail: String = if err.chars().count() > 400 {
                let skip = err.chars().count() - 400;
                format!("…{}", err.chars().skip(skip).collect::<String>())
            } else {
                err
            };
            return Err(ExecError::Exit {
                cmd: c.command.clone(),
                code: out.status.code().unwrap_or(-1),
                stderr: tail,
            });
        }
        if out.stdout.len() > MAX_STDOUT {
            return Err(ExecError::Decode(format!("more than {MAX_STDOUT} bytes")));
        }
        credential(&out.stdout, &c.api_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(command: &str, api_version: &str) -> ExecConfig {
        ExecConfig {
            command: command.into(),
            args: vec![],
            env: vec![],
            api_version: api_version.into(),
            interactive: InteractiveMode::IfAvailable,
            provide_cluster_info: false,
            install_hint: String::new(),
        }
    }

    #[test]
    fn a_credential_is_read_as_client_go_reads_it() {
        let ok = br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"2030-01-02T03:04:05Z"}}"#;
        let c = credential(ok, V1).unwrap();
        assert_eq!(c.token.as_deref(), Some("t"));
        assert_eq!(c.expiry, Some(crate::core::time::parse_rfc3339("2030-01-02T03:04:05Z").unwrap()));
        let yaml = b"apiVersion: client.authentication.k8s.io/v1beta1\nkind: ExecCredential\nstatus: {token: y}\n";
        assert_eq!(credential(yaml, V1BETA1).unwrap(), Credential { token: Some("y".into()), ..Default::default() });
        let cert = include_str!("testdata/client-ec.crt");
        let key = include_str!("testdata/client-ec.key");
        let pair = json!({"apiVersion": V1, "kind": "ExecCredential", "status": {"clientCertificateData": cert, "clientKeyData": key}});
        let c = credential(pair.to_string().as_bytes(), V1).unwrap();
        assert_eq!((c.token, c.cert.map(|(c, _)| c)), (None, Some(cert.as_bytes().to_vec())));
        for (out, want) in [
            (&b"not json"[..], "decoding stdout:"),
            (br#"{"apiVersion":"client.authentication.k8s.io/v1","status":{"token":"t"}}"#, "Object 'Kind' is missing"),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}}"#,
                "exec plugin is configured to use API version client.authentication.k8s.io/v1, plugin returned version client.authentication.k8s.io/v1beta1",
            ),
            (br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#, "exec plugin didn't return a status field"),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}"#,
                "exec plugin didn't return a token or cert/key pair",
            ),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientKeyData":"k"}}"#,
                "exec plugin returned only certificate or key, not both",
            ),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientKeyData":"k","clientCertificateData":"c"}}"#,
                "failed parsing client key/certificate",
            ),
            (
                br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"t","expirationTimestamp":"soon"}}"#,
                "expirationTimestamp",
            ),
        ] {
            let e = credential(out, V1).unwrap_err().to_string();
            assert!(e.contains(want), "{}: {e}", String::from_utf8_lossy(out));
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn exec_info_carries_the_cluster_only_when_asked() {
        let v: Value = serde_json::from_str(&exec_info(V1, None)).unwrap();
        assert_eq!(v, json!({"kind": "ExecCredential", "apiVersion": V1, "spec": {"interactive": false}}));
        let c = ClusterInfo {
            server: "https://h:6443".into(),
            tls_server_name: Some("k".into()),
            insecure: false,
            ca: Some(b"PEM".to_vec()),
            proxy_url: None,
            config: Some(json!({"a": 1})),
        };
        let v: Value = serde_json::from_str(&exec_info(V1BETA1, Some(&c))).unwrap();
        assert_eq!(v["apiVersion"], V1BETA1);
        assert_eq!(
            v["spec"]["cluster"],
            json!({"server": "https://h:6443", "tls-server-name": "k", "certificate-authority-data": "UEVN", "config": {"a": 1}})
        );
    }

    fn script(dir: &std::path::Path, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt as _;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.display().to_string()
    }

    #[tokio::test]
    async fn the_plugin_runs_once_until_its_credential_expires_or_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let count = d.path().join("count");
        // Each run appends a line and prints a token naming the run; EXP decides the expiry.
        let body = format!(
            "echo run >> {c}\nn=$(wc -l < {c} | tr -d ' ')\necho \"$KUBERNETES_EXEC_INFO\" > {d}/info\n\
             printf '{{\"apiVersion\":\"{V1}\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"t%s-%s\"%s}}}}' \"$n\" \"$GREETING\" \"$EXP\"",
            c = count.display(),
            d = d.path().display()
        );
        let mut c = cfg(&script(d.path(), "plugin", &body), V1);
        c.env = vec![("GREETING".into(), "hi".into()), ("EXP".into(), String::new())];
        c.provide_cluster_info = true;
        let cluster = ClusterInfo { server: "https://h:1".into(), ..Default::default() };
        let a = ExecAuth::new(c.clone(), Some(cluster), None);
        let first = a.get().await.unwrap();
        assert_eq!(first.cred.token.as_deref(), Some("t1-hi"));
        assert_eq!(a.get().await.unwrap().serial, first.serial, "no expiry: cached");
        assert_eq!(a.runs(), 1);
        let info: Value = serde_json::from_str(&std::fs::read_to_string(d.path().join("info")).unwrap()).unwrap();
        assert_eq!(info["spec"]["cluster"]["server"], "https://h:1");
        // A 401 to the cached credential re-runs it once; a stale refusal does not.
        a.refused(&first).await.unwrap();
        let second = a.get().await.unwrap();
        assert_eq!(second.cred.token.as_deref(), Some("t2-hi"));
        a.refused(&first).await.unwrap();
        assert_eq!(a.runs(), 2, "a refusal of an older credential does not run it again");
        // An expired credential is replaced at the next request.
        c.env[1].1 = ",\"expirationTimestamp\":\"2001-01-01T00:00:00Z\"".into();
        let a = ExecAuth::new(c, None, None);
        assert_eq!(a.get().await.unwrap().cred.token.as_deref(), Some("t3-hi"));
        assert_eq!(a.get().await.unwrap().cred.token.as_deref(), Some("t4-hi"), "expired: run again");
    }

    #[tokio::test]
    async fn plugin_failures_are_client_go_s_errors_on_one_line() {
        let d = tempfile::tempdir().unwrap();
        let mut missing = cfg("dpctl-no-such-plugin", V1);
        missing.install_hint = "Install it:\n  apt install the-plugin".into();
        let e = ExecAuth::new(missing, None, None).get().await.unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("exec: executable dpctl-no-such-plugin not found; It looks like"), "{s}");
        assert!(s.ends_with("; Install it: apt install the-plugin"), "{s}");
        assert!(std::error::Error::source(&e).is_some());
        let failing =
            cfg(&script(d.path(), "fail", "echo 'token expired' >&2; echo run aws sso login >&2; exit 3"), V1);
        let s = ExecAuth::new(failing, None, None).get().await.unwrap_err().to_string();
        assert!(s.contains("failed with exit code 3 (stderr: token expired run aws sso login)"), "{s}");
        let mut always = cfg("true", V1);
        always.interactive = InteractiveMode::Always;
        let s = ExecAuth::new(always, None, None).get().await.unwrap_err().to_string();
        assert!(s.starts_with("exec plugin cannot support interactive mode: standard input is "), "{s}");
        let s = ExecAuth::new(cfg("/nonexistent/plugin", V1), None, None).get().await.unwrap_err().to_string();
        assert!(s.starts_with("exec: fork/exec /nonexistent/plugin: no such file or directory; "), "{s}");
        let mut slow = ExecAuth::new(cfg(&script(d.path(), "slow", "exec sleep 30"), V1), None, None);
        slow.timeout = Duration::from_millis(300);
        let s = slow.get().await.unwrap_err().to_string();
        assert!(s.contains("did not finish within") && s.contains("killed"), "{s}");
        let s = ExecAuth::new(cfg(&script(d.path(), "silent", "true"), V1), None, None).get().await.unwrap_err();
        assert!(s.to_string().starts_with("decoding stdout:"), "{s}");
        assert!(!s.to_string().contains('\n'), "{s}");
    }
}
