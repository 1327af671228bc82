//! What deciding a request costs with 10 rules and with 10,000, in
//! process: `Decider::check` on the memory store, every request a random
//! rule's descriptor (the rules `scripts/bench` matches against for target
//! 6, without gRPC around them). Eight rounds alternate the two; the first
//! is a warm-up. Bench-only, not part of the product.
//!
//! ```text
//! cargo run --release -p slidegate-cli --example match_cost [-- REQUESTS_PER_ROUND]
//! ONLY=10000 perf record -g target/release/examples/match_cost   # one side alone
//! ```

use std::path::PathBuf;
use std::time::Instant;

use slidegate::{Limiter, MemoryStore};
use slidegate_server::config::{Config, Rules};
use slidegate_server::{CheckRequest, Decider, Mode, RequestDescriptor, ServiceStore};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `n` descriptors `rule=r<i>` of 1,000,000 per minute, as the benchmark's.
fn decider(n: u64) -> Decider {
    let mut yaml = String::from("domain: test\ndescriptors:\n");
    for i in 0..n {
        yaml.push_str(&format!(
            "  - key: rule\n    value: r{i}\n    rate_limit: {{unit: minute, requests_per_unit: 1000000}}\n"
        ));
    }
    let config = Config::from_texts(&[(PathBuf::from("match.yaml"), yaml)]).expect("the rules load");
    let store = ServiceStore::Memory(MemoryStore::builder().build());
    Decider::new(Limiter::builder(store).build(), Rules::new(config))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let requests: u32 = std::env::args().nth(1).map_or(300_000, |s| s.parse().expect("a count"));
    let only: Option<u64> = std::env::var("ONLY").ok().map(|s| s.parse().expect("10 or 10000"));
    let sides: Vec<(u64, Decider)> =
        [10, 10_000].into_iter().filter(|n| only.is_none_or(|o| o == *n)).map(|n| (n, decider(n))).collect();
    let mut random: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut ns: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
    for round in 0..8 {
        for (side, (n, decider)) in sides.iter().enumerate() {
            let started = Instant::now();
            for _ in 0..requests {
                // xorshift: a different rule each request, the same sequence each run.
                random ^= random << 13;
                random ^= random >> 7;
                random ^= random << 17;
                let request = CheckRequest {
                    domain: "test".into(),
                    descriptors: vec![RequestDescriptor {
                        entries: vec![("rule".into(), format!("r{}", random % n))],
                        hits_addend: None,
                        limit: None,
                    }],
                    hits_addend: 0,
                };
                let answer = decider.check(&request, Mode::Charge).await.expect("answered");
                std::hint::black_box(answer);
            }
            if round > 0 {
                ns[side].push(started.elapsed().as_nanos() as f64 / f64::from(requests));
            }
        }
    }
    for ((n, _), ns) in sides.iter().zip(&ns) {
        println!("{n:>6} rules: {:.0} ns per request (median of 7 rounds)", median(ns.clone()));
    }
    if let [ten, many] = &ns[..] {
        let ratios = ten.iter().zip(many).map(|(a, b)| b / a).collect();
        println!("10,000 against 10: {:.2}x (median of the rounds' ratios)", median(ratios));
    }
}
