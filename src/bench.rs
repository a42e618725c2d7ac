//! Load generation and latency statistics for `dpctl bench`.

use crate::core::time::millis;
use serde::Serialize;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Latency percentiles in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
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
    /// Failed calls by gRPC code (or by a kind of failure of the answer, e.g. `ClaimError`).
    pub errors_by_code: BTreeMap<String, u64>,
    /// What the first failed calls said (at most [`FIRST_ERRORS`] different messages), when the caller kept it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub first_errors: Vec<String>,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Calls per second.
    pub throughput: f64,
    /// Latency of successful calls; none when every call failed.
    pub latency_ms: Option<Percentiles>,
    /// Stopped early by Ctrl-C (SIGINT) or SIGTERM: the figures cover the calls made so far.
    pub interrupted: bool,
}

/// How many different error messages a report keeps.
pub const FIRST_ERRORS: usize = 3;

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
    /// This many calls (iterations) in total.
    Requests(u64),
    /// Until this much time has passed.
    Duration(Duration),
}

/// Why one call failed: a gRPC code or a kind of its own, and what the peer said (if kept).
#[derive(Debug, Clone, PartialEq)]
pub struct CallError {
    /// What the failures are counted by, e.g. `Unavailable` or `ClaimError`.
    pub kind: String,
    /// What went wrong, for the first few shown.
    pub detail: Option<String>,
}

impl From<tonic::Code> for CallError {
    fn from(code: tonic::Code) -> Self {
        CallError { kind: format!("{code:?}"), detail: None }
    }
}

/// One timed call of an iteration.
#[derive(Debug)]
pub struct Timed {
    /// How long it took.
    pub elapsed: Duration,
    /// How it ended.
    pub result: Result<(), CallError>,
}

/// What Ctrl-C does to the iterations in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnInterrupt {
    /// Drop them: the report covers the calls that finished.
    Drop,
    /// Let them finish (each call is bounded by its timeout), start no more:
    /// for iterations that must end as they began (prepare, then unprepare).
    Finish,
}

/// Run `call(i)` from `concurrency` workers until the budget is spent or
/// `interrupt` resolves (then calls in flight are dropped and the report
/// covers what finished).
pub async fn load<F, Fut, E>(
    call_name: &str,
    concurrency: usize,
    budget: Budget,
    progress: Option<indicatif::ProgressBar>,
    interrupt: impl Future<Output = ()>,
    call: F,
) -> LoadReport
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send,
    E: Into<CallError>,
{
    let [r] = load_iterations([call_name], concurrency, budget, progress, OnInterrupt::Drop, interrupt, move |i| {
        let t = Instant::now();
        let f = call(i);
        async move {
            let result = f.await.map_err(Into::into);
            [Timed { elapsed: t.elapsed(), result }]
        }
    })
    .await;
    r
}

/// What one RPC of a run counted, shared by the workers.
#[derive(Default)]
struct Tally {
    by_kind: BTreeMap<String, u64>,
    first: Vec<String>,
}

/// Run iterations of `N` timed calls each (`iteration(i)` makes them and
/// says how each went) from `concurrency` workers until the budget is spent
/// or `interrupt` resolves; one report per call, in the order of `names`.
pub async fn load_iterations<const N: usize, F, Fut>(
    names: [&str; N],
    concurrency: usize,
    budget: Budget,
    progress: Option<indicatif::ProgressBar>,
    on_interrupt: OnInterrupt,
    interrupt: impl Future<Output = ()>,
    iteration: F,
) -> [LoadReport; N]
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = [Timed; N]> + Send,
{
    let iteration = Arc::new(iteration);
    let next = Arc::new(AtomicU64::new(0));
    let tallies: Arc<Mutex<[Tally; N]>> = Arc::new(Mutex::new(std::array::from_fn(|_| Tally::default())));
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
        let (iteration, next, tallies, progress) = (iteration.clone(), next.clone(), tallies.clone(), progress.clone());
        let stop = stop_all.clone();
        workers.spawn(async move {
            let mut lat: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::with_capacity(1024));
            loop {
                if stop.is_cancelled() || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= limit {
                    break;
                }
                let timed = match on_interrupt {
                    OnInterrupt::Drop => tokio::select! {
                        r = iteration(i) => r,
                        _ = stop.cancelled() => break,
                    },
                    OnInterrupt::Finish => iteration(i).await,
                };
                for (k, t) in timed.into_iter().enumerate() {
                    match t.result {
                        Ok(()) => lat[k].push(t.elapsed),
                        Err(e) => {
                            let mut g = tallies.lock().unwrap_or_else(|p| p.into_inner());
                            let tally = &mut g[k];
                            *tally.by_kind.entry(e.kind).or_default() += 1;
                            if let Some(d) = e.detail {
                                if tally.first.len() < FIRST_ERRORS && !tally.first.contains(&d) {
                                    tally.first.push(d);
                                }
                            }
                        }
                    }
                }
                if let Some(p) = &progress {
                    p.inc(1);
                }
            }
            lat
        });
    }
    let mut all: [Vec<Duration>; N] = std::array::from_fn(|_| Vec::new());
    let mut interrupted = false;
    tokio::pin!(interrupt);
    loop {
        tokio::select! {
            r = workers.join_next() => match r {
                Some(r) => {
                    for (k, l) in r.unwrap_or_else(|_| std::array::from_fn(|_| Vec::new())).into_iter().enumerate() {
                        all[k].extend(l);
                    }
                }
                None => break,
            },
            _ = &mut interrupt, if !interrupted => {
                interrupted = true;
                stop_all.cancel();
            }
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    if let Some(p) = progress {
        p.finish_and_clear();
    }
    let tallies = std::mem::replace(
        &mut *tallies.lock().unwrap_or_else(|p| p.into_inner()),
        std::array::from_fn(|_| Tally::default()),
    );
    let mut tallies = tallies.into_iter();
    let mut all = all.into_iter();
    std::array::from_fn(|k| {
        let tally = tallies.next().unwrap_or_default();
        let lat = all.next().unwrap_or_default();
        let nerr: u64 = tally.by_kind.values().sum();
        let requests = lat.len() as u64 + nerr;
        LoadReport {
            call: names[k].into(),
            concurrency,
            requests,
            errors: nerr,
            errors_by_code: tally.by_kind,
            first_errors: tally.first,
            seconds: (seconds * 1000.0).round() / 1000.0,
            throughput: (requests as f64 / seconds).round(),
            latency_ms: (!lat.is_empty()).then(|| percentiles(lat)),
            interrupted,
        }
    })
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
                        Ok::<(), tonic::Code>(())
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

    #[tokio::test]
    async fn iterations_report_each_call_and_keep_the_first_few_messages() {
        let [a, b] = load_iterations(
            ["Prepare", "Unprepare"],
            3,
            Budget::Requests(60),
            None,
            OnInterrupt::Finish,
            std::future::pending(),
            |i| async move {
                let fail = (i % 4 == 0)
                    .then(|| CallError { kind: "ClaimError".into(), detail: Some(format!("no device {}", i % 20)) });
                [
                    Timed { elapsed: Duration::from_millis(2), result: fail.map_or(Ok(()), Err) },
                    Timed { elapsed: Duration::from_millis(1), result: Ok(()) },
                ]
            },
        )
        .await;
        assert_eq!((a.call.as_str(), a.requests, a.errors), ("Prepare", 60, 15));
        assert_eq!(a.errors_by_code["ClaimError"], 15);
        assert_eq!(a.first_errors.len(), FIRST_ERRORS, "{:?}", a.first_errors);
        assert!(a.first_errors.iter().all(|e| e.starts_with("no device ")), "{:?}", a.first_errors);
        assert_eq!((b.call.as_str(), b.requests, b.errors), ("Unprepare", 60, 0));
        assert_eq!(b.latency_ms.unwrap().p50, 1.0);
        assert!(b.first_errors.is_empty());
        // a code-only error keeps no message, so device-plugin reports have no firstErrors
        let r =
            load("x", 1, Budget::Requests(3), None, std::future::pending(), |_| async { Err(tonic::Code::Internal) })
                .await;
        assert!(r.first_errors.is_empty());
        assert!(serde_json::to_value(&r).unwrap().get("firstErrors").is_none());
    }

    #[tokio::test]
    async fn an_interrupt_lets_iterations_in_flight_finish_when_asked() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let started = Arc::new(AtomicU64::new(0));
        let (release_tx, release_rx) = tokio::sync::watch::channel(false);
        let s = started.clone();
        let run = load_iterations(
            ["a", "b"],
            2,
            Budget::Requests(u64::MAX),
            None,
            OnInterrupt::Finish,
            async {
                let _ = rx.await;
            },
            move |_| {
                let (s, mut release) = (s.clone(), release_rx.clone());
                async move {
                    s.fetch_add(1, Ordering::Relaxed);
                    let _ = release.wait_for(|r| *r).await;
                    [
                        Timed { elapsed: Duration::from_millis(1), result: Ok(()) },
                        Timed { elapsed: Duration::from_millis(1), result: Ok(()) },
                    ]
                }
            },
        );
        let ([a, b], _) = tokio::join!(run, async {
            while started.load(Ordering::Relaxed) < 2 {
                tokio::task::yield_now().await;
            }
            let _ = tx.send(());
            // the interrupt is seen before the iterations are let go
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            let _ = release_tx.send(true);
        });
        assert!(a.interrupted && b.interrupted);
        assert_eq!((a.requests, b.requests), (2, 2), "both iterations in flight finished, none started after");
    }
}
