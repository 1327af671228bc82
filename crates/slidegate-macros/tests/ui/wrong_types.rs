use std::time::Duration;

use slidegate::{Limiter, MemoryStore, RateLimited, rate_limit};

struct Service {
    name: String,
}

impl Service {
    #[rate_limit(limiter = self.name, limit = 5, window = "1s", key = user)]
    async fn not_a_limiter(&self, user: &str) -> Result<(), RateLimited> {
        Ok(())
    }
}

#[rate_limit(limiter = limiter, rule = Duration::from_secs(1), key = user)]
async fn not_a_rule(limiter: &Limiter<MemoryStore>, user: &str) -> Result<(), RateLimited> {
    Ok(())
}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user, cost = items.len())]
async fn cost_not_u32(limiter: &Limiter<MemoryStore>, user: &str, items: Vec<u8>) -> Result<(), RateLimited> {
    Ok(())
}

fn main() {}
