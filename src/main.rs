//! dpctl's entry point: parse, run, map errors to exit codes — nothing else.

fn main() {
    // --version names the commit and target; set here, not in the command line's definition, so the
    // generated man pages do not change with every commit.
    let cli = dpctl::commands::parse_with_version(dpctl::version::LONG);
    colored::control::set_override(dpctl::render::color_wanted(cli.global.no_color));
    let workers = std::env::var("DPCTL_WORKERS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .map(|n| n.min(256))
        .unwrap_or_else(|| cli.workers());
    let rt = if workers == 0 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()
    };
    let code = match rt {
        Err(e) => {
            eprintln!("dpctl: cannot start the async runtime: {e}");
            1
        }
        Ok(rt) => {
            let result = rt.block_on(dpctl::commands::run(cli));
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
            // Every queued event-log line out before exiting (bounded: a blocked stdout cannot hold the exit).
            dpctl::core::log::flush_all(std::time::Duration::from_secs(2));
            match result {
                Ok(()) => 0,
                Err(e) => {
                    if e.exit_code() != 0 && !matches!(e, dpctl::core::Error::Silent(_)) {
                        eprintln!("dpctl: {e}");
                    }
                    e.exit_code()
                }
            }
        }
    };
    std::process::exit(code);
}
