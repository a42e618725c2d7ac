//! Load generation and latency statistics for `dpctl bench`.

use crate::core::time::millis;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

/// Percentiles of a set of latencies.
pub fn percentiles(mut v: Vec<Duration>) -> Percentiles {
    if v.is_empty() {
        return Percentiles::default();
    }
    v.sort_unstable();
    let at = |q: f64| millis(v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1]);
    Percentiles { p50: at(0.50), p90: at(0.90), p99: at(0.99), max: millis(v[v.len() - 1]) }
}

/// What a load run measured.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LoadReport {
    /// What was called.
    pub call: String,
    /// Concurrent callers.
    pub concurrency: usize,
    /// Calls made.
    pub requests: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Failed calls by gRPC code.
    pub errors_by_code: BTreeMap<String, u64>,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Calls per second.
    pub throughput: f64,
    /// Latency of successful calls.
    pub latency_ms: Percentiles,
}

/// How long a load run goes.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// This many calls in total.
    Requests(u64),
    /// Until this much time has passed.
    Duration(Duration),
}

/// Run `call(i)` from `concurrency` workers until the budget is spent.
pub async fn load<F, Fut>(
    call_name: &str,
    concurrency: usize,
    budget: Budget,
    progress: Option<indicatif::ProgressBar>,
    call: F,
) -> LoadReport
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), tonic::Code>> + Send,
{
    let call = Arc::new(call);
    let next = Arc::new(AtomicU64::new(0));
    let errors: Arc<Mutex<BTreeMap<String, u64>>> = Arc::default();
    let start = Instant::now();
    let deadline = match budget {
        Budget::Duration(d) => Some(start + d),
        Budget::Requests(_) => None,
    };
    let limit = match budget {
        Budget::Requests(n) => n,
        Budget::Duration(_) => u64::MAX,
    };
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (call, next, errors, progress) = (call.clone(), next.clone(), errors.clone(), progress.clone());
        workers.spawn(async move {
            let mut lat = Vec::with_capacity(1024);
            loop {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= limit {
                    break;
                }
                let t = Instant::now();
                match call(i).await {
                    Ok(()) => lat.push(t.elapsed()),
                    Err(code) => {
                        *errors.lock().unwrap_or_else(|p| p.into_inner()).entry(format!("{code:?}")).or_default() += 1
                    }
                }
                if let Some(p) = &progress {
                    p.inc(1);
                }
            }
            lat
        });
    }
    let mut all = Vec::new();
    while let Some(r) = workers.join_next().await {
        all.extend(r.unwrap_or_default());
    }
    let seconds = start.elapsed().as_secs_f64();
    let errors = Arc::try_unwrap(errors).map(|m| m.into_inner().unwrap_or_default()).unwrap_or_default();
    let nerr: u64 = errors.values().sum();
    let requests = all.len() as u64 + nerr;
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    LoadReport {
        call: call_name.into(),
        concurrency,
        requests,
        errors: nerr,
        errors_by_code: errors,
        seconds: (seconds * 1000.0).round() / 1000.0,
        throughput: (requests as f64 / seconds).round(),
        latency_ms: percentiles(all),
    }
}

/// Peak resident memory (VmHWM) of a process, in MiB.
pub fn peak_rss_mib(pid: u32) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = s.lines().find(|l| l.starts_with("VmHWM:"))?.split_whitespace().nth(1)?.parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_pick_the_right_samples() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let p = percentiles(v);
        assert_eq!((p.p50, p.p90, p.p99, p.max), (50.0, 90.0, 99.0, 100.0));
        assert_eq!(percentiles(vec![Duration::from_millis(7)]).p99, 7.0);
        assert_eq!(percentiles(vec![]).max, 0.0);
    }

    #[tokio::test]
    async fn load_counts_calls_and_errors() {
        let r = load("x", 4, Budget::Requests(100), None, |i| async move {
            if i % 10 == 0 {
                Err(tonic::Code::Internal)
            } else {
                Ok(())
            }
        })
        .await;
        assert_eq!((r.requests, r.errors), (100, 10));
        assert_eq!(r.errors_by_code["Internal"], 10);
    }
}
