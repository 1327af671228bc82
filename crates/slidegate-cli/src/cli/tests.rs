//! Unit tests of the parent module.

use super::*;
use clap::CommandFactory;

#[test]
fn clap_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn bench_needs_exactly_one_bound() {
    let base = ["slidegate", "bench", "--limit", "5", "--window", "1s"];
    assert!(Cli::try_parse_from(base).is_err());
    let both = [&base[..], &["--requests", "10", "--duration", "1s"]].concat();
    assert!(Cli::try_parse_from(both).is_err());
    let long = [&base[..], &["--duration", "11m"]].concat();
    assert!(Cli::try_parse_from(long).is_err());
    let ok = [&base[..], &["--requests", "10"]].concat();
    assert!(Cli::try_parse_from(ok).is_ok());
}

#[test]
fn bench_limiter_flags() {
    let base = ["slidegate", "bench", "--limit", "5", "--window", "1s", "--requests", "10"];
    let bench = |extra: &[&str]| {
        let cli = Cli::try_parse_from([&base[..], extra].concat())?;
        let Command::Bench(args) = cli.command else { panic!("not bench") };
        Ok::<_, clap::Error>(args)
    };
    let args = bench(&[]).unwrap();
    assert_eq!((args.policy, args.deadline, args.cost), (FailurePolicy::Fallback, None, 1));
    assert!(!args.no_deny_cache && !args.no_breaker && args.prefix.is_none());
    let args =
        bench(&["--policy", "fail-closed", "--deadline", "5s", "--no-deny-cache", "--no-breaker"]).unwrap();
    assert_eq!((args.policy, args.deadline), (FailurePolicy::FailClosed, Some(Duration::from_secs(5))));
    assert!(args.no_deny_cache && args.no_breaker);
    let err = bench(&["--policy", "sometimes"]).unwrap_err().to_string();
    assert!(err.contains("fail-open"), "{err}");
    let err = bench(&["--prefix", "a b"]).unwrap_err().to_string();
    assert!(err.contains("whitespace"), "{err}");
}

#[test]
fn numbers_are_bounded() {
    let base = ["slidegate", "bench", "--limit", "5", "--window", "1s", "--requests", "10"];
    let parse = |extra: &[&str]| Cli::try_parse_from([&base[..], extra].concat());
    let Command::Bench(args) = parse(&["--rate", "2500.5", "--threads", "1"]).unwrap().command else {
        panic!("not bench")
    };
    assert_eq!((args.rate, args.threads), (Some(2500.5), Some(1)));
    for bad in [
        &["--rate", "0"][..],
        &["--rate", "-3"],
        &["--rate", "NaN"],
        &["--rate", "fast"],
        &["--threads", "0"],
        &["--requests", "0"],
        &["--concurrency", "0"],
        &["--concurrency", "1025"],
        &["--keys", "0"],
        &["--deadline", "0s"],
        &["--deadline", "1h"],
        &["--timeout", "11s"],
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn deadline_help_names_the_library_default() {
    let help = Cli::command().find_subcommand_mut("bench").unwrap().render_long_help().to_string();
    let default = format!("default: {}", humantime::format_duration(slidegate::limits::DEFAULT_DEADLINE));
    assert!(help.contains(&default), "{help}");
}

#[test]
fn simulate_needs_no_arguments() {
    let cli = Cli::try_parse_from(["slidegate", "simulate"]).unwrap();
    let Command::Simulate(args) = cli.command else { panic!("not simulate") };
    assert_eq!(args.pattern, PatternArg::All);
    assert_eq!(args.window, Duration::from_secs(60));
}

#[test]
fn serve_header_timeout_is_a_duration_above_zero() {
    let base = ["slidegate", "serve", "--rules", "rules.yaml"];
    let serve = |extra: &[&str]| {
        let cli = Cli::try_parse_from([&base[..], extra].concat())?;
        let Command::Serve(args) = cli.command else { panic!("not serve") };
        Ok::<_, clap::Error>(args)
    };
    assert_eq!(serve(&[]).unwrap().header_timeout, slidegate_server::DEFAULT_HEADER_TIMEOUT);
    assert_eq!(serve(&["--header-timeout", "500ms"]).unwrap().header_timeout, Duration::from_millis(500));
    let err = serve(&["--header-timeout", "0s"]).unwrap_err().to_string();
    assert!(err.contains("above zero"), "{err}");
    let err = serve(&["--header-timeout", "soon"]).unwrap_err().to_string();
    assert!(err.contains("expected a duration"), "{err}");
}

#[test]
fn help_describes_every_command_and_groups_bench_flags_where_they_apply() {
    let top = Cli::command().render_help().to_string();
    for (command, says) in
        [("serve", "gateway"), ("bench", "service"), ("replay", "trace"), ("simulate", "algorithm")]
    {
        let line =
            top.lines().find(|l| l.trim_start().starts_with(command)).unwrap_or_else(|| panic!("{top}"));
        assert!(line.contains(says), "{command}: {line}");
    }
    let mut command = Cli::command();
    let bench = command.find_subcommand_mut("bench").expect("bench").render_long_help().to_string();
    // A heading's lines: up to the next line that is not indented.
    let section = |heading: &str| {
        assert!(bench.lines().any(|l| l.starts_with(heading)), "no `{heading}` in {bench}");
        let lines = bench.lines().skip_while(|l| !l.starts_with(heading)).skip(1);
        lines.take_while(|l| l.is_empty() || l.starts_with(' ')).collect::<Vec<_>>().join("\n")
    };
    let limiter = section(LIMITER_FLAGS);
    let target = section("Driving a service (--target)");
    for flag in [
        "--no-deny-cache",
        "--deadline",
        "--no-auto-batch",
        "--redis-stats",
        "--limit",
        "--window",
        "--algorithm",
    ] {
        assert!(limiter.contains(flag), "{flag} under the limiter's heading");
        assert!(!target.contains(flag), "{flag} not under --target's");
    }
    assert!(target.contains("--descriptor"), "{target}");
}
