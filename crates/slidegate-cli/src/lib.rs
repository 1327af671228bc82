//! The `slidegate` command, as a library so its parts can be tested without
//! spawning the binary.
//!
//! * [`replay`] feeds a recorded trace (JSON lines) through a store, with the
//!   trace's timestamps as the clock, and prints one decision per line;
//! * [`simulate`] runs every algorithm on the same generated traffic and
//!   shows how much each admits in a *true* sliding window;
//! * [`bench`](mod@bench) measures decisions per second and latency of a store;
//! * [`serve`](mod@serve) runs the rate-limit service (`slidegate-server`).
//!
//! This crate is a binary's back room, not a published library, so it uses
//! `anyhow` for errors the way binaries do; the typed errors of `slidegate`
//! are kept as the source of each chain.
//!
//! ```no_run
//! use clap::Parser;
//! use slidegate_cli::cli::Cli;
//!
//! let cli = Cli::parse_from(["slidegate", "simulate", "--pattern", "boundary"]);
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(slidegate_cli::run(cli))?;
//! # Ok::<(), anyhow::Error>(())
//! ```

pub mod baselines;
pub mod bench;
pub mod cli;
pub mod redis_stats;
pub mod replay;
pub mod rule_args;
pub mod serve;
pub mod simulate;
pub mod store_choice;

use cli::{Cli, Command};

/// Runs the subcommand `cli` names.
///
/// # Errors
///
/// Whatever the subcommand reports: invalid arguments or input, a store
/// that cannot be reached, or a file that cannot be written.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Replay(args) => replay::run(args).await,
        Command::Simulate(args) => simulate::run(&args).await,
        Command::Bench(args) => bench::run(*args).await,
        Command::Serve(args) => serve::run(*args).await,
    }
}
