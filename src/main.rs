//! dpctl's entry point: parse, run, map errors to exit codes — nothing else.

use clap::Parser;

fn main() {
    let cli = dpctl::cli::Cli::parse();
    colored::control::set_override(dpctl::render::color_wanted(cli.global.no_color));
    let code = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Err(e) => {
            eprintln!("dpctl: cannot start the async runtime: {e}");
            1
        }
        Ok(rt) => {
            let result = rt.block_on(dpctl::commands::run(cli));
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
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
