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
    /// Latency of successful calls; none when every call failed.
    pub latency_ms: Option<Percentiles>,
    /// Stopped early by Ctrl-C (SIGINT) or SIGTERM: the figures cover the calls made so far.
    pub interrupted: bool,
}

impl LoadReport {
    /// The failure a run with errors is, e.g. `2000 of 2000 calls failed (Unimplemented: 2000)`.
    pub fn failure(&self) -> Option<String> {
        if self.errors == 0 {
            return None;
        }
        let by: Vec<String> = self.errors_by_code.iter().map(|(c, n)| format!("{c}: {n}")).collect();
        Some(format!("{} of {} calls failed ({})", self.errors, self.requests, by.join(", ")))
    }
}

/// How long a load run goes.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    /// This many calls in total.
    Requests(u64),
    /// Until this much time has passed.
    Duration(Duration),
}

/// Run `call(i)` from `concurrency` workers until the budget is spent or
/// `interrupt` resolves (then calls in flight are dropped and the report
/// covers what finished).
pub async fn load<F, Fut>(
    call_name: &str,
    concurrency: usize,
    budget: Budget,
    progress: Option<indicatif::ProgressBar>,
    interrupt: impl Future<Output = ()>,
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
    let stop_all = tokio_util::sync::CancellationToken::new();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (call, next, errors, progress) = (call.clone(), next.clone(), errors.clone(), progress.clone());
        let stop = stop_all.clone();
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
                let r = tokio::select! {
                    r = call(i) => r,
                    _ = stop.cancelled() => break,
                };
                match r {
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
    let mut interrupted = false;
    tokio::pin!(interrupt);
    loop {
        tokio::select! {
            r = workers.join_next() => match r {
                Some(r) => all.extend(r.unwrap_or_default()),
                None => break,
            },
            _ = &mut interrupt, if !interrupted => {
                interrupted = true;
                stop_all.cancel();
            }
        }
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
        latency_ms: (!all.is_empty()).then(|| percentiles(all)),
        interrupted,
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
        let r = load("x", 4, Budget::Requests(100), None, std::future::pending(), |i| async move {
            if i % 10 == 0 {
                Err(tonic::Code::Internal)
            } else {
                Ok(())
            }
        })
        .await;
        assert_eq!((r.requests, r.errors), (100, 10));
        assert_eq!(r.errors_by_code["Internal"], 10);
        assert_eq!(r.failure().unwrap(), "10 of 100 calls failed (Internal: 10)");
        assert!(r.latency_ms.is_some() && !r.interrupted);
    }

    #[tokio::test]
    async fn all_errors_give_no_latency_and_an_interrupt_keeps_the_results() {
        let r = load("x", 2, Budget::Requests(50), None, std::future::pending(), |_| async {
            Err(tonic::Code::Unimplemented)
        })
        .await;
        assert!(r.latency_ms.is_none(), "no latency figures from failed calls");
        assert_eq!(r.failure().unwrap(), "50 of 50 calls failed (Unimplemented: 50)");

        // calls that never finish, interrupted: the run ends with what it had
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let done = Arc::new(AtomicU64::new(0));
        let d = done.clone();
        let run = load(
            "x",
            2,
            Budget::Requests(u64::MAX),
            None,
            async {
                let _ = rx.await;
            },
            move |i| {
                let d = d.clone();
                async move {
                    if i < 5 {
                        d.fetch_add(1, Ordering::Relaxed);
                        Ok(())
                    } else {
                        std::future::pending().await
                    }
                }
            },
        );
        let (r, _) = tokio::join!(run, async {
            while done.load(Ordering::Relaxed) < 5 {
                tokio::task::yield_now().await;
            }
            let _ = tx.send(());
        });
        assert!(r.interrupted);
        assert_eq!(r.requests, 5);
    }
}
