use slidegate::{Limiter, MemoryStore, RateLimited, rate_limit};

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user)]
fn not_async(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

fn main() {}
