//! The `slidegate` command. Everything it does lives in the library
//! (`slidegate_cli`); this file only parses arguments, starts the async
//! runtime, and turns the outcome into an exit code.
//!
//! Run with `cargo run --release -p slidegate-cli -- simulate`.

use std::process::ExitCode;

use clap::Parser;
use slidegate_cli::cli::Cli;

/// mimalloc rather than glibc's malloc: per-request allocations (headers,
/// bodies, futures) cost the service and the gateway measurably less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = cli.worker_threads() {
        builder.worker_threads(threads);
    }
    // A service answers in batches (one Redis reply wakes many requests):
    // without the LIFO slot, their connections are written once per batch
    // rather than once per answer (see .cargo/config.toml).
    #[cfg(tokio_unstable)]
    if cli.serves_batches() {
        builder.disable_lifo_slot();
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("slidegate: error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(slidegate_cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            // `{:#}` prints the whole chain: "line 3: invalid cost: …".
            eprintln!("slidegate: error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
