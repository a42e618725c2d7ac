//! dpctl's entry point: parse, run, map errors to exit codes — nothing else.

use clap::Parser;

fn main() {
    let cli = dpctl::cli::Cli::parse();
    colored::control::set_override(dpctl::render::color_wanted(cli.global.no_color));
    let workers = std::env::var("DPCTL_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| dpctl::commands::runtime_workers(&cli.command));
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
                    if e.exit_code() != 0 {
                        eprintln!("dpctl: {e}");
                    }
                    e.exit_code()
                }
            }
        }
    };
    std::process::exit(code);
}
