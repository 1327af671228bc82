use slidegate::{Limiter, MemoryStore, rate_limit};

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user)]
async fn returns_nothing(limiter: &Limiter<MemoryStore>, user: &str) {}

#[rate_limit(limiter = limiter, limit = 5, window = "1s", key = user)]
async fn returns_an_option(limiter: &Limiter<MemoryStore>, user: &str) -> Option<u32> {
    Some(1)
}

fn main() {}
